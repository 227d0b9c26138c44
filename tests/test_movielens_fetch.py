"""fetch_movielens: download, check, extract, cache, and every way a download can fail.

Nothing here reaches the internet: each release's URL points to a server on 127.0.0.1
(http.server in a thread) that serves small zip archives built here with the folders of
the real releases, and the test supplies their sizes and digests in place of the
published ones.  The data folder is a temporary folder.
"""
import dataclasses
import hashlib
import http.server
import io
import os
import socket
import threading
import zipfile

import numpy as np
import pytest

from polylite import _movielens
from polylite.datasets import (MovieLensFormatError, fetch_movielens, get_data_home,
                               load_movielens)

GENRE_FLAGS = "|".join(["0"] * 19)

# Each release: the folder its archive holds, and the files in it (small, in the real
# formats: 100K's tab-separated u.data, 1M's and 10M's "::", 20M's and 25M's CSV files).
FILES = {
    "100k": ("ml-100k", {
        "u.data": "1\t10\t5\t100\n2\t10\t3\t200\n1\t20\t4\t300\n",
        "u.user": "1|24|M|technician|85711\n2|53|F|other|94043\n",
        "u.item": (f"10|Toy Story (1995)|01-Jan-1995||http://x|{GENRE_FLAGS}\n"
                   f"20|Heat (1995)|01-Jan-1995||http://y|{GENRE_FLAGS}\n"),
        "u1.base": "1\t10\t5\t100\n1\t20\t4\t300\n",
        "u1.test": "2\t10\t3\t200\n",
        "README": "MovieLens 100K\n",
    }),
    "1m": ("ml-1m", {
        "ratings.dat": "1::10::5::978300760\n2::20::3::978300761\n",
        "users.dat": "1::F::1::10::48067\n2::M::56::16::70072\n",
        "movies.dat": ("10::Toy Story (1995)::Animation|Children's|Comedy\n"
                       "20::Heat (1995)::Action|Crime|Thriller\n"),
        "README": "MovieLens 1M\n",
    }),
    "10m": ("ml-10M100K", {
        "ratings.dat": "1::10::5::838985046\n1::20::3.5::838983525\n7::20::0.5::1\n",
        "movies.dat": ("10::Caf\xe9 (1995)::Comedy|IMAX\n"
                       "20::Pull My Daisy (1958)::(no genres listed)\n").encode("latin-1"),
        "tags.dat": "15::10::excellent::1215184630\n",
        "README.html": "<html></html>\n",
    }),
    "20m": ("ml-20m", {
        "ratings.csv": ("userId,movieId,rating,timestamp\n1,10,3.5,1112486027\n"
                        "3,11,4.0,1112484676\n"),
        "movies.csv": ('movieId,title,genres\n10,Toy Story (1995),Animation|Children\n'
                       '11,"American President, The (1995)",Comedy|Drama|Romance\n'),
        "tags.csv": "userId,movieId,tag,timestamp\n",
        "links.csv": "movieId,imdbId,tmdbId\n",
        "README.txt": "MovieLens 20M\n",
    }),
    "25m": ("ml-25m", {
        "ratings.csv": ("userId,movieId,rating,timestamp\n1,10,5.0,1147880044\n"
                        "1,12,0.5,1147868817\n2,12,4.5,1147868828\n"),
        "movies.csv": ("movieId,title,genres\n10,Am\u00e9lie (2001),Comedy|Romance\n"
                       "12,Heat (1995),(no genres listed)\n").encode("utf-8"),
        "README.txt": "MovieLens 25M\n",
    }),
}


def _archive(version, folder=None, extra=None):
    """The zip archive of a release's small files, under its folder (or ``folder``)."""
    name, files = FILES[version]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for file, content in {**files, **(extra or {})}.items():
            z.writestr(f"{folder or name}/{file}",
                       content.encode() if isinstance(content, str) else content)
    return buffer.getvalue()


def _n_ratings(version):
    name, files = FILES[version]
    text = files.get("u.data") or files.get("ratings.dat") or files["ratings.csv"]
    return text.count("\n") - ("ratings.csv" in files)


class _Server(http.server.ThreadingHTTPServer):
    """Serves ``files`` (URL path -> bytes); a path in ``cut`` sends only that many bytes
    of its body (after a Content-Length of all of them) and drops the connection."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files, self.cut, self.requests = {}, {}, []

    def url(self, path):
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.requests.append(self.path)
        body = self.server.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:self.server.cut.get(self.path, len(body))])
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch, tmp_path):
    """The local server, every release's URL pointing to it (served archives: none yet),
    and the data folder a temporary folder (POLYLITE_DATA)."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")  # a proxy of the environment: not here
    monkeypatch.setenv("POLYLITE_DATA", str(tmp_path / "data"))
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    for version, release in _movielens.RELEASES.items():
        monkeypatch.setitem(_movielens.RELEASES, version, dataclasses.replace(
            release, url=httpd.url("/movielens/" + release.url.rsplit("/", 1)[-1])))
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def _publish(monkeypatch, server, version, archive=None, served=None, digest="sha256"):
    """Serve the release's small archive (or ``served`` in its place) and make
    ``archive`` (by default the one served) the published one: its size and digest."""
    archive = _archive(version) if archive is None else archive
    release = _movielens.RELEASES[version]
    path = release.url.split(str(server.server_address[1]), 1)[1]
    server.files[path] = archive if served is None else served
    checks = ({"size": len(archive), "sha256": hashlib.sha256(archive).hexdigest(),
               "md5": None} if digest == "sha256" else
              {"size": None, "sha256": None, "md5": hashlib.md5(archive).hexdigest()})
    monkeypatch.setitem(_movielens.RELEASES, version, dataclasses.replace(
        release, n_ratings=_n_ratings(version), **checks))
    return path


def _leftovers(home):
    """Files in the data folder other than extracted release folders."""
    return sorted(name for name in os.listdir(home)
                  if not os.path.isdir(os.path.join(home, name)))


# ---- the data folder -------------------------------------------------------------------

def test_data_home_argument_environment_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYLITE_DATA", str(tmp_path / "env"))
    assert get_data_home() == str(tmp_path / "env")
    assert get_data_home(tmp_path / "arg") == str(tmp_path / "arg")
    monkeypatch.delenv("POLYLITE_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == str(tmp_path / "home" / "polylite_data")
    monkeypatch.setenv("POLYLITE_DATA", "~/elsewhere")
    assert get_data_home() == str(tmp_path / "home" / "elsewhere")
    assert not os.listdir(tmp_path)  # nothing created


# ---- downloads -------------------------------------------------------------------------

@pytest.mark.parametrize("version", list(FILES))
def test_fetch_each_release(monkeypatch, server, version):
    path = _publish(monkeypatch, server, version,
                    digest="md5" if version == "10m" else "sha256")
    data = fetch_movielens(version, progress=False)
    home = get_data_home()
    folder = os.path.join(home, FILES[version][0])
    assert server.requests == [path]
    assert os.path.isdir(folder) and _leftovers(home) == []  # the archive removed
    assert data.version == version
    assert len(data.ratings.rating) == _n_ratings(version)
    reread = load_movielens(folder)
    np.testing.assert_array_equal(reread.ratings.rating, data.ratings.rating)
    if version == "100k":
        assert sorted(data.splits) == ["u1"] and data.users.occupation[0] == "technician"
    elif version == "1m":
        assert data.users.age.tolist() == [1, 56] and len(data.genre_names) == 18
    elif version == "10m":
        np.testing.assert_array_equal(data.ratings.rating, [5, 3.5, 0.5])
        np.testing.assert_array_equal(data.users.user_id, [1, 7])
        assert data.genre_names == ("Comedy", "IMAX")
        assert data.items.title[0] == "Caf\xe9 (1995)"  # Latin-1
        np.testing.assert_array_equal(data.items.genres, [[1, 1], [0, 0]])
        assert data.items.release_year.tolist() == [1995, 1958]
    elif version == "20m":
        assert data.items.title[1] == "American President, The (1995)"  # quoted
        assert data.genre_names == ("Animation", "Children", "Comedy", "Drama", "Romance")
        np.testing.assert_array_equal(data.ratings.timestamp, [1112486027, 1112484676])
    else:
        assert data.items.title[0] == "Am\u00e9lie (2001)"  # UTF-8
        np.testing.assert_array_equal(data.users.user_id, [1, 2])
        assert data.items.genres[1].sum() == 0


def test_second_call_reads_the_folder_without_downloading(monkeypatch, server):
    _publish(monkeypatch, server, "100k")
    first = fetch_movielens("ml-100k", splits=["u1"], progress=False)
    second = fetch_movielens("100K", progress=False)
    assert len(server.requests) == 1
    np.testing.assert_array_equal(first.splits["u1"][1], second.splits["u1"][1])


def test_data_home_argument(monkeypatch, server, tmp_path):
    _publish(monkeypatch, server, "1m")
    fetch_movielens("1m", data_home=tmp_path / "mine", progress=False)
    assert os.path.isdir(tmp_path / "mine" / "ml-1m")
    assert not os.path.exists(get_data_home())  # POLYLITE_DATA's folder unused


def test_progress_bar_on_stderr(monkeypatch, server, capsys, tmp_path):
    _publish(monkeypatch, server, "100k")
    fetch_movielens("100k", data_home=tmp_path / "quiet", progress=False)
    assert capsys.readouterr().err == ""
    fetch_movielens("100k")
    assert "ml-100k.zip" in capsys.readouterr().err


def test_corrupted_download_is_removed_and_fetched_again(monkeypatch, server):
    archive = _archive("100k")
    corrupted = archive[:100] + bytes([archive[100] ^ 1]) + archive[101:]
    path = _publish(monkeypatch, server, "100k", archive, served=corrupted)
    with pytest.raises(OSError, match=r"ml-100k.zip is corrupted: its SHA256 digest is "
                                      r"\w+, the published one \w+; the file was removed"):
        fetch_movielens("100k", progress=False)
    assert _leftovers(get_data_home()) == []
    server.files[path] = archive  # the next call downloads it again
    assert len(fetch_movielens("100k", progress=False).ratings.rating) == 3
    assert server.requests == [path, path]


def test_broken_off_download_is_removed(monkeypatch, server):
    path = _publish(monkeypatch, server, "100k")
    server.cut[path] = 200
    with pytest.raises(OSError, match=r"the download of \S+ml-100k.zip broke off after "
                                      r"200 of [\d,]+ bytes"):
        fetch_movielens("100k", progress=False)
    assert _leftovers(get_data_home()) == []
    del server.cut[path]
    fetch_movielens("100k", progress=False)


def test_truncated_archive(monkeypatch, server):
    archive = _archive("20m")
    _publish(monkeypatch, server, "20m", archive, served=archive[:-10])
    with pytest.raises(OSError, match=rf"ml-20m.zip is truncated: {len(archive) - 10:,} "
                                      rf"bytes instead of {len(archive):,}"):
        fetch_movielens("20m", progress=False)
    assert _leftovers(get_data_home()) == []


def test_md5_checked(monkeypatch, server):
    archive = _archive("10m")
    _publish(monkeypatch, server, "10m", archive, served=_archive("10m", extra={"x": ""}),
             digest="md5")
    with pytest.raises(OSError, match=r"ml-10m.zip is corrupted: its MD5 digest"):
        fetch_movielens("10m", progress=False)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_offline_error_says_what_to_download_and_where(monkeypatch, server):
    archive = _archive("100k")
    _publish(monkeypatch, server, "100k", archive)
    url = f"http://127.0.0.1:{_closed_port()}/movielens/ml-100k.zip"
    monkeypatch.setitem(_movielens.RELEASES, "100k", dataclasses.replace(
        _movielens.RELEASES["100k"], url=url))
    home = get_data_home()
    with pytest.raises(OSError) as error:
        fetch_movielens("100k", progress=False)
    message = str(error.value)
    assert message.startswith(f"could not download {url}: ")
    assert (f"Instead, download {url} by other means and put ml-100k.zip (or the folder "
            f"ml-100k it holds) in {home}, then call fetch_movielens('100k') again"
            ) in message
    assert not os.path.exists(home) or _leftovers(home) == []
    # As it says: the archive put there by hand is checked and read, offline.
    with open(os.path.join(home, "ml-100k.zip"), "wb") as f:
        f.write(archive)
    assert len(fetch_movielens("100k").ratings.rating) == 3
    assert _leftovers(home) == []


def test_folder_put_there_by_hand(monkeypatch, server, tmp_path):
    _publish(monkeypatch, server, "1m")
    with zipfile.ZipFile(io.BytesIO(_archive("1m"))) as z:
        z.extractall(tmp_path / "data")
    assert fetch_movielens("1m").version == "1m"
    assert server.requests == []


def test_missing_without_download(monkeypatch, server):
    _publish(monkeypatch, server, "25m")
    with pytest.raises(FileNotFoundError, match=r"MovieLens 25M is not in .*data: "
                                                r"download \S+ml-25m.zip by other means "
                                                r"and put ml-25m.zip .* or call "
                                                r"fetch_movielens\('25m'\) to download it"):
        fetch_movielens("25m", download_if_missing=False)
    assert server.requests == []


def test_corrupted_archive_put_there_by_hand(monkeypatch, server):
    _publish(monkeypatch, server, "100k")
    home = get_data_home()
    os.makedirs(home)
    with open(os.path.join(home, "ml-100k.zip"), "wb") as f:
        f.write(b"not a zip archive")
    with pytest.raises(OSError, match=r"ml-100k.zip is truncated: 17 bytes"):
        fetch_movielens("100k")
    assert _leftovers(home) == [] and server.requests == []


def test_not_found_on_the_server(server):
    with pytest.raises(OSError, match=r"could not download \S+ml-1m.zip: HTTP Error 404: "
                                      r"Not Found\. "
                                      r"Instead, download"):
        fetch_movielens("1m", progress=False)
    assert _leftovers(get_data_home()) == []


def test_archive_without_the_release_folder(monkeypatch, server):
    _publish(monkeypatch, server, "100k", _archive("100k", folder="ml-100k-copy"))
    with pytest.raises(OSError, match=r"does not hold the folder 'ml-100k'; the file was "
                                      r"removed"):
        fetch_movielens("100k", progress=False)
    assert os.listdir(get_data_home()) == []


def test_folder_with_other_ratings(monkeypatch, server):
    _publish(monkeypatch, server, "100k")
    monkeypatch.setitem(_movielens.RELEASES, "100k", dataclasses.replace(
        _movielens.RELEASES["100k"], n_ratings=100_000))
    with pytest.raises(MovieLensFormatError, match=r"ml-100k holds 3 ratings, MovieLens "
                                                   r"100K 100,000: remove the folder"):
        fetch_movielens("100k", progress=False)


def test_unknown_version(server):
    with pytest.raises(ValueError, match=r"unknown MovieLens version '30m'"):
        fetch_movielens("30m")


def test_published_checks_cover_every_release():
    """Each release has a published digest, and the five URLs are GroupLens's."""
    for version, release in _movielens.RELEASES.items():
        assert release.url == (f"https://files.grouplens.org/datasets/movielens/"
                               f"ml-{version}.zip")
        assert (release.sha256 and len(release.sha256) == 64) or \
            (release.md5 and len(release.md5) == 32)
