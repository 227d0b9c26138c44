"""Readers of the MovieLens folders (GroupLens Research), and their download.

:func:`fetch_movielens` downloads a release from GroupLens once into the data folder
(:func:`~polylite.datasets.get_data_home`), checks it and reads it;
:func:`load_movielens` reads a folder wherever it is.  polylite ships no MovieLens data
(its licence forbids redistribution).  Every line is checked; a malformed one is
reported with its file and line number.
"""
import csv
import io
import os
from dataclasses import dataclass

import numpy as np
from sklearn.utils import Bunch

from ._download import (ArchiveError, DownloadError, check_archive, download,
                        extract_folder, get_data_home)

__all__ = ["fetch_movielens", "load_movielens", "MovieLens", "MovieLensFormatError"]

# The 19 genre flags of u.item, in u.genre order, and the 18 genres of movies.dat.
GENRES_100K = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy",
               "Crime", "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror",
               "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")
GENRES_1M = GENRES_100K[1:]
SPLITS_100K = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")
# The genres of a movie with none (10M, 20M, 25M).
NO_GENRES = "(no genres listed)"
# The header lines of the CSV files of 20M and 25M.
RATINGS_HEADER = ("userId", "movieId", "rating", "timestamp")
MOVIES_HEADER = ("movieId", "title", "genres")


class MovieLensFormatError(ValueError):
    """A MovieLens file is malformed (the message names the file and line)."""


@dataclass(frozen=True, repr=False)
class MovieLens:
    """A MovieLens release read by :func:`load_movielens` or :func:`fetch_movielens`
    (see :func:`load_movielens` for the tables).

    Attributes
    ----------
    ratings, users, items : Bunch
        Tables: Bunch objects of equal-length arrays, one key per column.
    genre_names : tuple of str
        The columns of ``items.genres``.
    splits : dict
        Split name -> ``(train_index, test_index)``, row indices into ``ratings``.
    version : str
        "100k", "1m", "10m", "20m" or "25m".
    """
    ratings: Bunch
    users: Bunch
    items: Bunch
    genre_names: tuple
    splits: dict
    version: str

    def __repr__(self):
        return (f"MovieLens({self.version}: {len(self.ratings.rating)} ratings, "
                f"{len(self.users.user_id)} users, {len(self.items.item_id)} items, "
                f"splits {sorted(self.splits)})")


# ---- download ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Release:
    """An archive GroupLens publishes: its URL, the folder it holds, its number of
    ratings, and its size in bytes and SHA-256 or MD5 digest where they are known."""
    name: str
    url: str
    folder: str
    n_ratings: int
    size: int = None
    sha256: str = None
    md5: str = None


_GROUPLENS = "https://files.grouplens.org/datasets/movielens/"
# Sizes and SHA-256 digests of the 100K, 1M, 20M and 25M archives: as TensorFlow Datasets
# records them for these URLs (tensorflow_datasets/url_checksums/movielens.txt in
# github.com/tensorflow/datasets).  It has no 10M archive: its MD5 digest is the one
# GroupLens publishes beside it (ml-10m.zip.md5), as FederatedScope records it
# (federatedscope/mf/dataset/movielens.py in github.com/alibaba/FederatedScope).
# Numbers of ratings: the README of each release.
RELEASES = {
    "100k": _Release("MovieLens 100K", _GROUPLENS + "ml-100k.zip", "ml-100k", 100_000,
                     size=4_924_029, sha256="50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b"
                                            "761f4e3a7cd717c6a3229"),
    "1m": _Release("MovieLens 1M", _GROUPLENS + "ml-1m.zip", "ml-1m", 1_000_209,
                   size=5_917_549, sha256="a6898adb50b9ca05aa231689da44c217cb524e7ebd39d2"
                                          "64c56e2832f2c54e20"),
    "10m": _Release("MovieLens 10M", _GROUPLENS + "ml-10m.zip", "ml-10M100K", 10_000_054,
                    md5="ce571fd55effeba0271552578f2648bd"),
    "20m": _Release("MovieLens 20M", _GROUPLENS + "ml-20m.zip", "ml-20m", 20_000_263,
                    size=198_702_078, sha256="96f243c338a8665f6bcc89c53edf6ee39162a84694"
                                             "0de6b7c8c48aeada765ff3"),
    "25m": _Release("MovieLens 25M", _GROUPLENS + "ml-25m.zip", "ml-25m", 25_000_095,
                    size=261_978_986, sha256="8b21cfb7eb1706b4ec0aac894368d90acf26ebdfb6"
                                             "aced3ebd4ad5bd1eb9c6aa"),
}


def fetch_movielens(version="100k", *, data_home=None, splits=None,
                    download_if_missing=True, progress=True):
    """Download a MovieLens release from GroupLens once, then read it.

    The first call downloads the release's zip archive from
    ``https://files.grouplens.org/datasets/movielens/`` into the data folder, checks it,
    extracts its folder there and removes the archive; later calls read the folder
    without downloading.  Without a connection, download the archive by other means and
    put it (or the folder it holds) in the data folder:

    ==========  ===============  ==============  ==========  =======================
    version     archive          folder          ratings     archive checked against
    ==========  ===============  ==============  ==========  =======================
    ``"100k"``  ``ml-100k.zip``  ``ml-100k``     100,000     size and SHA-256
    ``"1m"``    ``ml-1m.zip``    ``ml-1m``       1,000,209   size and SHA-256
    ``"10m"``   ``ml-10m.zip``   ``ml-10M100K``  10,000,054  MD5
    ``"20m"``   ``ml-20m.zip``   ``ml-20m``      20,000,263  size and SHA-256
    ``"25m"``   ``ml-25m.zip``   ``ml-25m``      25,000,095  size and SHA-256
    ==========  ===============  ==============  ==========  =======================

    The MD5 digest of the 10M archive is the one GroupLens publishes beside it
    (``ml-10m.zip.md5``); the sizes and SHA-256 digests of the others are those
    TensorFlow Datasets records for the same URLs.  A folder is checked by its number
    of ratings, also when it was put there by hand.

    Parameters
    ----------
    version : {"100k", "1m", "10m", "20m", "25m"}, default="100k"
        The release (``"ml-100k"`` and the other archive names work too).
    data_home : str, path-like or None, default=None
        The data folder; None: :func:`~polylite.datasets.get_data_home` (the
        ``POLYLITE_DATA`` environment variable, else ``~/polylite_data``).
    splits : sequence of str or None, default=None
        MovieLens 100K's official splits to read, as in :func:`load_movielens`.
    download_if_missing : bool, default=True
        Download the release when it is not in the data folder; False raises
        FileNotFoundError instead.
    progress : bool, default=True
        Show a progress bar on stderr while downloading.

    Returns
    -------
    data : MovieLens
        The tables, as :func:`load_movielens` returns them.

    Raises
    ------
    FileNotFoundError
        The release is not in the data folder and ``download_if_missing`` is False.
    OSError
        The download failed: the server could not be reached or the transfer broke off
        (the message names the URL to download and the folder to put it in), or the
        archive is truncated or corrupted (it is removed, so that the next call
        downloads it again).
    MovieLensFormatError
        A file of the release is malformed, or the folder holds another number of
        ratings than the release has.

    Examples
    --------
    >>> from polylite.datasets import fetch_movielens
    >>> ml = fetch_movielens("100k")  # doctest: +SKIP
    >>> train, test = ml.splits["u1"]  # doctest: +SKIP
    """
    key = str(version).lower().removeprefix("ml-")
    if key not in RELEASES:
        raise ValueError(f"unknown MovieLens version {version!r}; expected one of "
                         f"{list(RELEASES)}")
    release = RELEASES[key]
    home = get_data_home(data_home)
    folder = os.path.join(home, release.folder)
    if not os.path.isdir(folder):
        archive = os.path.join(home, release.url.rsplit("/", 1)[-1])
        checks = dict(size=release.size, sha256=release.sha256, md5=release.md5)
        try:
            if os.path.isfile(archive):  # put there by hand
                check_archive(archive, **checks)
            elif not download_if_missing:
                raise FileNotFoundError(f"{release.name} is not in {home}: "
                                        f"{_where_to_put(release, home)}, or call "
                                        f"fetch_movielens({key!r}) to download it")
            else:
                download(release.url, archive, progress=progress, **checks)
            extract_folder(archive, release.folder, folder)
        except ArchiveError as exc:
            raise ArchiveError(f"{exc}; the file was removed: call "
                               f"fetch_movielens({key!r}) again to download it "
                               f"afresh") from None
        except DownloadError as exc:
            raise DownloadError(f"{exc}. Instead, {_where_to_put(release, home)}, then "
                                f"call fetch_movielens({key!r}) again") from exc
        os.remove(archive)
    data = load_movielens(folder, splits=splits)
    if len(data.ratings.rating) != release.n_ratings:
        raise MovieLensFormatError(
            f"{folder} holds {len(data.ratings.rating):,} ratings, {release.name} "
            f"{release.n_ratings:,}: remove the folder and call fetch_movielens({key!r}) "
            f"to download it afresh")
    return data


def _where_to_put(release, home):
    """How to put a release in the data folder by hand."""
    return (f"download {release.url} by other means and put "
            f"{release.url.rsplit('/', 1)[-1]} (or the folder {release.folder} it holds) "
            f"in {home}")


# ---- reading -------------------------------------------------------------------------

def load_movielens(path, *, splits=None):
    """Read a MovieLens folder: ratings, users, items and official splits.

    The release is recognised by its files: ``u.data``, ``u.user``, ``u.item`` (100K);
    ``ratings.dat``, ``users.dat``, ``movies.dat`` (1M); ``ratings.dat``,
    ``movies.dat``, ``tags.dat`` (10M); ``ratings.csv``, ``movies.csv`` (20M, 25M).
    Tables are returned as :class:`~sklearn.utils.Bunch` objects of equal-length 1-D
    arrays (one key per column), the table format
    :class:`polylite.preprocessing.FieldEncoder` reads (and ``pandas.DataFrame(table)``
    makes a data frame of).  :func:`fetch_movielens` downloads a release and reads it.

    Parameters
    ----------
    path : str or path-like
        The folder, as distributed by GroupLens (``ml-100k``, ``ml-1m``,
        ``ml-10M100K``, ``ml-20m``, ``ml-25m``).
    splits : sequence of str or None, default=None
        MovieLens 100K only: which official train/test splits to read (``"u1"`` ...
        ``"u5"``, ``"ua"``, ``"ub"``; each from its ``.base`` and ``.test`` files).
        None reads every split whose two files are present; a split named here must be
        present.  The other releases have no official split files.

    Returns
    -------
    data : MovieLens
        - ``ratings``: Bunch of ``user_id``, ``item_id`` (int64, as in the files),
          ``rating`` (float64; half stars from 10M on) and ``timestamp`` (int64, seconds
          since 1970), each of shape (n_ratings,), in file order.
        - ``users``: Bunch of ``user_id``, ``age`` (int64; the age in years for 100K, the
          age-group code 1, 18, 25, 35, 45, 50 or 56 for 1M), ``gender`` ("M"/"F"),
          ``occupation`` (the name for 100K, the code 0-20 for 1M) and ``zip_code``
          (str), each of shape (n_users,).  10M, 20M and 25M have no user table: their
          ``users`` holds the ``user_id`` of the users who rated, sorted.
        - ``items``: Bunch of ``item_id``, ``title`` (str), ``release_year`` (float64,
          NaN when unknown; 100K from the release date, the others from the title) and
          ``genres`` (uint8 flags of shape (n_items, n_genres)).
        - ``genre_names``: tuple of str, the columns of ``items.genres`` (10M, 20M and
          25M: the genres their movies file names, sorted).
        - ``splits``: dict mapping a split name to ``(train_index, test_index)``, int64
          row indices into ``ratings`` (empty but for 100K).
        - ``version``: "100k", "1m", "10m", or for the CSV files of 20M and 25M the
          folder's name after "ml-" ("20m", "25m"; "csv" for a folder named otherwise).

    Raises
    ------
    FileNotFoundError
        If the folder or one of its required files (or a requested split file) is
        missing.
    MovieLensFormatError
        (a ValueError) if a line is malformed (wrong number of fields, a non-numeric id
        or rating, a duplicate id, a rating of an unknown user or item), naming the
        file and line number.

    Examples
    --------
    >>> from polylite.datasets import load_movielens
    >>> data = load_movielens("ml-100k")  # doctest: +SKIP
    >>> train, test = data.splits["u1"]  # doctest: +SKIP
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no MovieLens folder at {path!r} (fetch_movielens() "
                                f"downloads a release and reads it)")

    def has(name):
        return os.path.exists(os.path.join(path, name))

    if has("u.data"):
        return _load_100k(path, splits)
    if has("tags.dat") and not has("users.dat"):
        loader, name = _load_10m, "10M"
    elif has("ratings.dat") or has("users.dat") or has("movies.dat"):
        loader, name = _load_1m, "1M"
    elif has("ratings.csv") or has("movies.csv"):
        loader, name = _load_csv, "20M/25M"
    else:
        raise FileNotFoundError(f"{path!r} is not a MovieLens folder: it has none of "
                                f"u.data (100K), ratings.dat (1M, 10M) and ratings.csv "
                                f"(20M, 25M)")
    if splits:
        raise ValueError(f"MovieLens {name} has no official splits; got "
                         f"splits={splits!r}")
    return loader(path)


# ---- reading lines ---------------------------------------------------------------------

def _required(folder, name):
    file = os.path.join(folder, name)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"MovieLens file {name!r} is missing from {folder!r}")
    return file


def _decode(content, encoding):
    """Text of ``content``; encoding None: UTF-8, else Latin-1 (files of either)."""
    if encoding is None:
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError:
            encoding = "latin-1"
    return content.decode(encoding)


def _lines(content):
    """The lines of a file's bytes without line ends; one final empty line is dropped."""
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.rstrip(b"\r") for line in lines]


def _split_lines(file, sep, n_fields, encoding="latin-1", content=None, first_line=1):
    """Each line of ``file`` (or of ``content``, its bytes from line ``first_line`` on)
    split on ``sep`` into exactly ``n_fields`` fields."""
    if content is None:
        with open(file, "rb") as f:
            content = f.read()
    rows = [_decode(line, encoding).split(sep) for line in _lines(content)]
    for number, fields in enumerate(rows, first_line):
        if len(fields) != n_fields:
            raise MovieLensFormatError(
                f"{file}, line {number}: expected {n_fields} fields separated by {sep!r}, "
                f"found {len(fields)}")
    return rows


def _csv_rows(file, header):
    """The rows of a CSV file after its header line, which must be ``header``."""
    with open(file, "rb") as f:
        text = _decode(f.read(), None)
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0] != list(header):
        raise MovieLensFormatError(f"{file}, line 1: expected the header "
                                   f"{','.join(header)!r}")
    for number, fields in enumerate(rows[1:], 2):
        if len(fields) != len(header):
            raise MovieLensFormatError(f"{file}, line {number}: expected {len(header)} "
                                       f"fields separated by ',', found {len(fields)}")
    return rows[1:]


def _numbers(file, rows, column, name, integer=True, first_line=1):
    """Column ``column`` of the split ``rows`` as int64 (or float64), checked."""
    convert = int if integer else float
    values = np.empty(len(rows), dtype=np.int64 if integer else np.float64)
    for row, fields in enumerate(rows):
        try:
            values[row] = convert(fields[column])
        except ValueError:
            raise MovieLensFormatError(f"{file}, line {row + first_line}: {name} "
                                       f"{fields[column]!r} is not "
                                       f"{'an integer' if integer else 'a number'}"
                                       ) from None
    return values


# Bytes of a ratings file parsed at once (whole lines): memory stays near the size of the
# returned arrays on the largest releases.
BLOCK_BYTES = 2**24


def _read_ratings(file, sep, header=None):
    """user_id, item_id, rating, timestamp of a ratings file, whose first line must be
    ``header`` when one is given.

    A fast vectorised parse of a block of lines at a time; when any check fails (a line
    without exactly three separators, a token that is not a number, an id that is not an
    integer), the block is read again line by line to report the first malformed line.
    """
    blocks, first_line = [], 1
    with open(file, "rb") as f:
        if header is not None:
            line = _decode(f.readline().rstrip(b"\r\n"), None)
            if line != sep.join(header):
                raise MovieLensFormatError(f"{file}, line 1: expected the header "
                                           f"{sep.join(header)!r}")
            first_line = 2
        while True:
            content = f.read(BLOCK_BYTES)
            if not content:
                break
            if not content.endswith(b"\n"):
                content += f.readline()  # to the end of the line
            blocks.append(_parse_ratings(file, content, sep, first_line))
            first_line += len(blocks[-1][0])
    if not blocks:
        raise MovieLensFormatError(f"{file} holds no ratings")
    columns = []
    for j in range(4):  # a column at a time, each block's part freed once copied
        columns.append(np.concatenate([block[j] for block in blocks]))
        for block in blocks:
            block[j] = None
    return tuple(columns)


def _parse_ratings(file, content, sep, first_line):
    """The four columns of the ratings lines ``content`` (line ``first_line`` on)."""
    raw = np.frombuffer(content, dtype=np.uint8)
    newlines = np.flatnonzero(raw == ord("\n"))
    n_lines = newlines.size + (0 if content.endswith(b"\n") else 1)
    # Separator characters on each line (a stray one, or a missing one, is an error).
    marks = np.flatnonzero(raw == ord(sep[0]))
    per_line = np.bincount(np.searchsorted(newlines, marks), minlength=n_lines)
    try:
        if np.any(per_line != 3 * len(sep)):
            raise ValueError
        table = np.array(content.replace(sep.encode(), b" ").split(), dtype=np.float64)
        if table.size != 4 * n_lines:
            raise ValueError
        table = table.reshape(n_lines, 4)
        ids = table[:, [0, 1, 3]]
        if not np.all(np.isfinite(table)) or np.any(ids != np.round(ids)):
            raise ValueError
    except ValueError:
        _locate_bad_rating(file, content, sep, first_line)  # raises with the line number
        raise  # pragma: no cover - _locate_bad_rating always raises here
    return [table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2],
            table[:, 3].astype(np.int64)]


def _locate_bad_rating(file, content, sep, first_line):
    """Raise MovieLensFormatError for the first malformed line of ratings ``content``."""
    rows = _split_lines(file, sep, 4, content=content, first_line=first_line)
    for column, name in enumerate(("user id", "item id")):
        _numbers(file, rows, column, name, first_line=first_line)
    ratings = _numbers(file, rows, 2, "rating", integer=False, first_line=first_line)
    _numbers(file, rows, 3, "timestamp", first_line=first_line)
    bad = np.flatnonzero(~np.isfinite(ratings))
    if bad.size:
        raise MovieLensFormatError(f"{file}, line {bad[0] + first_line}: rating is not "
                                   f"finite")
    raise MovieLensFormatError(f"{file}: malformed")  # pragma: no cover


def _check_unique(file, keys, describe, first_line=1):
    """Raise unless ``keys`` are unique; ``describe(row)`` names the key of a row."""
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    if np.any(counts > 1):
        lines = np.flatnonzero(keys == keys[first[counts > 1][0]])[:2] + first_line
        raise MovieLensFormatError(f"{file}, line {lines[1]}: "
                                   f"{describe(lines[1] - first_line)} already appears on "
                                   f"line {lines[0]}")


def _id_check(file, ids, what, first_line=1):
    _check_unique(file, ids, lambda row: f"{what} {ids[row]}", first_line)


def _pair_check(file, ratings, keys):
    _check_unique(file, keys, lambda row: f"the rating of user {ratings.user_id[row]} for "
                                          f"item {ratings.item_id[row]}")


def _check_known(file, ids, known, what, table_file, first_line=1):
    unknown = np.flatnonzero(~np.isin(ids, known))
    if unknown.size:
        raise MovieLensFormatError(f"{file}, line {unknown[0] + first_line}: {what} "
                                   f"{ids[unknown[0]]} is not in "
                                   f"{os.path.basename(table_file)}")


def _ratings_bunch(file, sep, users_file, user_ids, items_file, item_ids, header=None):
    """The ratings of ``file``, their users checked against ``user_ids`` (unless
    ``users_file`` is None) and their items against ``item_ids``."""
    user, item, rating, timestamp = _read_ratings(file, sep, header)
    first_line = 1 if header is None else 2
    if users_file is not None:
        _check_known(file, user, user_ids, "user id", users_file, first_line)
    _check_known(file, item, item_ids, "item id", items_file, first_line)
    return Bunch(user_id=user, item_id=item, rating=rating, timestamp=timestamp)


def _year(text):
    """The four-digit year that ends ``text`` (a date or "Title (1995)"), or NaN."""
    text = text.strip().rstrip(")")
    tail = text[-4:]
    return float(tail) if len(tail) == 4 and tail.isdigit() else np.nan


def _movies(file, rows, genre_names=None, first_line=1):
    """The items table of movies.dat or movies.csv rows (id, title, genres separated by
    "|"), and the genre names: ``genre_names``, or those the file uses, sorted."""
    genre_lists = [[name for name in r[2].split("|") if name and name != NO_GENRES]
                   for r in rows]
    if genre_names is None:
        genre_names = tuple(sorted({name for names in genre_lists for name in names}))
    genres = np.zeros((len(rows), len(genre_names)), dtype=np.uint8)
    column = {name: j for j, name in enumerate(genre_names)}
    for row, names in enumerate(genre_lists):
        for name in names:
            if name not in column:
                raise MovieLensFormatError(f"{file}, line {row + first_line}: unknown "
                                           f"genre {name!r}")
            genres[row, column[name]] = 1
    items = Bunch(item_id=_numbers(file, rows, 0, "item id", first_line=first_line),
                  title=np.array([r[1] for r in rows]),
                  release_year=np.array([_year(r[1]) for r in rows]), genres=genres)
    _id_check(file, items.item_id, "item id", first_line)
    return items, genre_names


# ---- MovieLens 100K ------------------------------------------------------------------

def _load_100k(path, splits):
    users_file, items_file = _required(path, "u.user"), _required(path, "u.item")
    rows = _split_lines(users_file, "|", 5)
    users = Bunch(user_id=_numbers(users_file, rows, 0, "user id"),
                  age=_numbers(users_file, rows, 1, "age"),
                  gender=np.array([r[2] for r in rows]),
                  occupation=np.array([r[3] for r in rows]),
                  zip_code=np.array([r[4] for r in rows]))
    _id_check(users_file, users.user_id, "user id")
    rows = _split_lines(items_file, "|", 5 + len(GENRES_100K))
    for number, r in enumerate(rows, 1):
        if any(flag not in ("0", "1") for flag in r[5:]):
            raise MovieLensFormatError(f"{items_file}, line {number}: genre flags must be "
                                       f"0 or 1")
    genres = np.array([[flag == "1" for flag in r[5:]] for r in rows], dtype=np.uint8)
    items = Bunch(item_id=_numbers(items_file, rows, 0, "item id"),
                  title=np.array([r[1] for r in rows]),
                  release_year=np.array([_year(r[2]) for r in rows]),
                  genres=genres.reshape(len(rows), len(GENRES_100K)))
    _id_check(items_file, items.item_id, "item id")

    def ratings_of(name):
        return _ratings_bunch(_required(path, name), "\t", users_file, users.user_id,
                              items_file, items.item_id)

    ratings = ratings_of("u.data")
    if splits is None:
        splits = [s for s in SPLITS_100K
                  if all(os.path.isfile(os.path.join(path, f"{s}.{part}"))
                         for part in ("base", "test"))]
    elif isinstance(splits, str):
        splits = [splits]
    unknown = [s for s in splits if s not in SPLITS_100K]
    if unknown:
        raise ValueError(f"unknown MovieLens 100K splits {unknown}; expected some of "
                         f"{list(SPLITS_100K)}")
    index = _PairIndex(ratings, os.path.join(path, "u.data"), items.item_id.max() + 1)
    split_index = {s: tuple(index.rows_of(ratings_of(f"{s}.{part}"),
                                          os.path.join(path, f"{s}.{part}"))
                            for part in ("base", "test")) for s in splits}
    return MovieLens(ratings=ratings, users=users, items=items, genre_names=GENRES_100K,
                     splits=split_index, version="100k")


class _PairIndex:
    """Row of each (user, item) pair of the full ratings, to express splits as indices."""

    def __init__(self, ratings, file, stride):
        self.stride, self.ratings, self.file = int(stride), ratings, file
        keys = self._keys(ratings)
        _pair_check(file, ratings, keys)
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]

    def _keys(self, ratings):
        return ratings.user_id * self.stride + ratings.item_id

    def rows_of(self, part, file):
        keys = self._keys(part)
        _pair_check(file, part, keys)
        pos = np.minimum(np.searchsorted(self.sorted, keys), len(self.sorted) - 1)
        rows = self.order[pos]
        wrong = np.flatnonzero((self.sorted[pos] != keys) |
                               (self.ratings.rating[rows] != part.rating) |
                               (self.ratings.timestamp[rows] != part.timestamp))
        if wrong.size:
            raise MovieLensFormatError(
                f"{file}, line {wrong[0] + 1}: the rating of user {part.user_id[wrong[0]]} "
                f"for item {part.item_id[wrong[0]]} is not the one in "
                f"{os.path.basename(self.file)}")
        return rows


# ---- MovieLens 1M --------------------------------------------------------------------

def _load_1m(path):
    users_file, items_file = _required(path, "users.dat"), _required(path, "movies.dat")
    ratings_file = _required(path, "ratings.dat")
    rows = _split_lines(users_file, "::", 5)
    users = Bunch(user_id=_numbers(users_file, rows, 0, "user id"),
                  age=_numbers(users_file, rows, 2, "age"),
                  gender=np.array([r[1] for r in rows]),
                  occupation=_numbers(users_file, rows, 3, "occupation"),
                  zip_code=np.array([r[4] for r in rows]))
    _id_check(users_file, users.user_id, "user id")
    items, _ = _movies(items_file, _split_lines(items_file, "::", 3), GENRES_1M)
    ratings = _ratings_bunch(ratings_file, "::", users_file, users.user_id, items_file,
                             items.item_id)
    return MovieLens(ratings=ratings, users=users, items=items, genre_names=GENRES_1M,
                     splits={}, version="1m")


# ---- MovieLens 10M, 20M and 25M: no user table -------------------------------------------

def _load_10m(path):
    items_file, ratings_file = _required(path, "movies.dat"), _required(path, "ratings.dat")
    items, genre_names = _movies(items_file,
                                 _split_lines(items_file, "::", 3, encoding=None))
    ratings = _ratings_bunch(ratings_file, "::", None, None, items_file, items.item_id)
    return MovieLens(ratings=ratings, users=Bunch(user_id=np.unique(ratings.user_id)),
                     items=items, genre_names=genre_names, splits={}, version="10m")


def _load_csv(path):
    items_file, ratings_file = _required(path, "movies.csv"), _required(path, "ratings.csv")
    items, genre_names = _movies(items_file, _csv_rows(items_file, MOVIES_HEADER),
                                 first_line=2)
    ratings = _ratings_bunch(ratings_file, ",", None, None, items_file, items.item_id,
                             header=RATINGS_HEADER)
    name = os.path.basename(os.path.abspath(path)).lower()
    return MovieLens(ratings=ratings, users=Bunch(user_id=np.unique(ratings.user_id)),
                     items=items, genre_names=genre_names, splits={},
                     version=name[3:] if name.startswith("ml-") else "csv")
