"""MovieLens readers: the real 100K folder (and 1M when its ratings are present), small
folders in both formats written here, and every error a malformed folder can raise."""
import shutil

import numpy as np
import pytest

from _data import SHARED, movielens_folder, movielens_missing
from polylite.datasets import MovieLensFormatError, load_movielens, load_movielens_100k


# ---- the real data ---------------------------------------------------------------------

def test_movielens_100k_tables(movielens_dir):
    data = load_movielens(movielens_dir)
    assert data.version == "100k"
    r = data.ratings
    assert r.rating.shape == (100_000,) and r.rating.dtype == np.float64
    assert np.bincount(r.rating.astype(int)).tolist() == [0, 6110, 11370, 27145, 34174,
                                                          21201]
    assert np.unique(r.user_id).size == 943 and np.unique(r.item_id).size == 1682
    assert (r.user_id[0], r.item_id[0], r.rating[0], r.timestamp[0]) == (196, 242, 3,
                                                                         881250949)
    assert data.users.user_id.tolist() == list(range(1, 944))
    assert (data.users.age[0], data.users.gender[0], data.users.occupation[0],
            data.users.zip_code[0]) == (24, "M", "technician", "85711")
    assert data.items.genres.shape == (1682, 19) and len(data.genre_names) == 19
    # Toy Story: Animation, Children's, Comedy.
    toy = data.items.genres[0]
    assert [data.genre_names[j] for j in np.flatnonzero(toy)] == ["Animation",
                                                                 "Children's", "Comedy"]
    assert data.items.title[0] == "Toy Story (1995)"
    assert data.items.release_year[0] == 1995
    assert np.isnan(data.items.release_year).sum() == 1  # one movie without a date
    assert any("\xe9" in title for title in data.items.title)  # latin-1 read right


def test_movielens_100k_official_splits(movielens_dir):
    data = load_movielens(movielens_dir)
    assert sorted(data.splits) == ["u1", "u2", "u3", "u4", "u5", "ua", "ub"]
    tests = []
    for name, (train, test) in data.splits.items():
        assert np.intersect1d(train, test).size == 0
        assert np.union1d(train, test).size == 100_000
        if name.startswith("u") and name[1].isdigit():
            assert (train.size, test.size) == (80_000, 20_000)
            tests.append(test)
        else:
            assert np.all(np.bincount(data.ratings.user_id[test])[1:] == 10)
    # The five test sets partition the data.
    assert np.array_equal(np.sort(np.concatenate(tests)), np.arange(100_000))
    # u1.test holds users 1..462 (the split files are sorted by user).
    assert data.ratings.user_id[data.splits["u1"][1]].max() == 462


def test_movielens_100k_chosen_splits(movielens_dir):
    assert sorted(load_movielens(movielens_dir, splits=["u3"]).splits) == ["u3"]
    assert load_movielens(movielens_dir, splits="ua").splits.keys() == {"ua"}
    assert load_movielens(movielens_dir, splits=[]).splits == {}


def test_load_movielens_100k_shortcut(movielens_dir):
    X, y, X_test, y_test = load_movielens_100k(movielens_dir, "u1")
    assert X.shape == (80_000, 943 + 1682) and X_test.shape == (20_000, 943 + 1682)
    data = load_movielens(movielens_dir, splits=["u1"])
    train = data.splits["u1"][0]
    np.testing.assert_array_equal(y, data.ratings.rating[train])
    # Column of the user, then of the item (ids are 1-based and contiguous).
    np.testing.assert_array_equal(X.indices.reshape(-1, 2),
                                  np.column_stack([data.ratings.user_id[train] - 1,
                                                   942 + data.ratings.item_id[train]]))


def test_movielens_1m_real_files_when_present(tmp_path):
    """The real release when it is found (_data.py), else the real users.dat and
    movies.dat of ../shared (which has no ratings.dat) with a small ratings.dat in their
    ids."""
    folder = movielens_folder("1m")
    if folder is not None:
        data = load_movielens(folder)
        assert data.ratings.rating.shape == (1_000_209,)
        assert (data.ratings.user_id[0], data.ratings.item_id[0]) == (1, 1193)
    elif (SHARED / "ml-1m" / "users.dat").exists():
        for name in ("users.dat", "movies.dat"):
            shutil.copy(SHARED / "ml-1m" / name, tmp_path / name)
        (tmp_path / "ratings.dat").write_text("1::1193::5::978300760\n6040::3952::3::1\n")
        data = load_movielens(tmp_path)
    else:
        pytest.skip(movielens_missing("1m"))
    assert data.version == "1m" and data.splits == {}
    assert data.users.user_id.shape == (6040,)
    assert np.unique(data.users.age).tolist() == [1, 18, 25, 35, 45, 50, 56]
    assert (data.users.gender == "M").sum() == 4331
    assert data.items.item_id.shape == (3883,) and data.items.item_id.max() == 3952
    assert data.items.genres.shape == (3883, 18) and data.items.genres.sum(1).min() >= 1
    assert data.items.release_year[0] == 1995


# ---- small folders in both formats -----------------------------------------------------

GENRE_FLAGS = "|".join(["0"] * 19)


def _write_100k(folder, data="1\t10\t5\t100\n2\t10\t3\t200\n1\t20\t4\t300\n",
                user=None, item=None, splits=True):
    folder.mkdir(exist_ok=True)
    (folder / "u.data").write_text(data)
    (folder / "u.user").write_text(user or "1|24|M|technician|85711\n2|53|F|other|94043\n")
    flags = GENRE_FLAGS[:-1] + "1"  # Western
    (folder / "u.item").write_bytes(
        (item or f"10|Caf\xe9 (1995)|01-Jan-1995||http://x|{flags}\n"
                 f"20|B (unknown)|||http://y|{GENRE_FLAGS}\n").encode("latin-1"))
    if splits:
        (folder / "u1.base").write_text("1\t10\t5\t100\n1\t20\t4\t300\n")
        (folder / "u1.test").write_text("2\t10\t3\t200\n")
    return folder


def _write_1m(folder, ratings="1::10::5::978300760\n2::20::3::978300761\n"
                              "1::20::4::978300762\n", users=None, movies=None):
    folder.mkdir(exist_ok=True)
    (folder / "users.dat").write_text(users or "1::F::1::10::48067\n2::M::56::16::70072\n")
    (folder / "movies.dat").write_bytes(
        (movies or "10::Caf\xe9 (1995)::Animation|Children's|Comedy\n"
                   "20::Heat (1995)::Action|Crime|Thriller\n").encode("latin-1"))
    (folder / "ratings.dat").write_text(ratings)
    return folder


def test_small_100k_folder(tmp_path):
    data = load_movielens(_write_100k(tmp_path / "ml"))
    np.testing.assert_array_equal(data.ratings.user_id, [1, 2, 1])
    np.testing.assert_array_equal(data.ratings.rating, [5, 3, 4])
    assert data.ratings.timestamp.dtype == np.int64
    assert data.items.title[0] == "Caf\xe9 (1995)"
    np.testing.assert_array_equal(data.items.release_year, [1995, np.nan])
    assert data.items.genres[0, -1] == 1 and data.items.genres[1].sum() == 0
    np.testing.assert_array_equal(data.splits["u1"][0], [0, 2])
    np.testing.assert_array_equal(data.splits["u1"][1], [1])


def test_small_1m_folder(tmp_path):
    data = load_movielens(_write_1m(tmp_path / "ml"))
    assert data.version == "1m" and data.genre_names[0] == "Action"
    np.testing.assert_array_equal(data.ratings.item_id, [10, 20, 20])
    np.testing.assert_array_equal(data.ratings.rating, [5, 3, 4])
    np.testing.assert_array_equal(data.users.age, [1, 56])
    np.testing.assert_array_equal(data.users.occupation, [10, 16])
    assert data.items.title[0] == "Caf\xe9 (1995)"
    assert [data.genre_names[j] for j in np.flatnonzero(data.items.genres[1])] == [
        "Action", "Crime", "Thriller"]
    assert "3 ratings" in repr(data)


def _write_10m(folder, ratings="1::10::5::1\n1::20::3.5::2\n9::20::0.5::3\n", movies=None):
    folder.mkdir(exist_ok=True)
    (folder / "ratings.dat").write_text(ratings)
    (folder / "movies.dat").write_text(movies or "10::Toy Story (1995)::Comedy|IMAX\n"
                                                 "20::Heat (1995)::(no genres listed)\n")
    (folder / "tags.dat").write_text("")
    return folder


def _write_csv(folder, ratings="1,10,3.5,1\n2,20,4.0,2\n", movies=None):
    folder.mkdir(exist_ok=True)
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" + ratings)
    (folder / "movies.csv").write_text("movieId,title,genres\n" + (
        movies or '10,"President, The (1995)",Drama|Comedy\n20,Heat (1995),Action\n'))
    return folder


def test_small_10m_folder(tmp_path):
    data = load_movielens(_write_10m(tmp_path / "ml-10M100K"))
    assert data.version == "10m" and data.genre_names == ("Comedy", "IMAX")
    np.testing.assert_array_equal(data.ratings.rating, [5, 3.5, 0.5])
    np.testing.assert_array_equal(data.users.user_id, [1, 9])
    np.testing.assert_array_equal(data.items.genres, [[1, 1], [0, 0]])
    with pytest.raises(ValueError, match="MovieLens 10M has no official splits"):
        load_movielens(tmp_path / "ml-10M100K", splits=["u1"])


@pytest.mark.parametrize("name, version", [("ml-20m", "20m"), ("ml-25m", "25m"),
                                           ("ratings", "csv")])
def test_small_csv_folder(tmp_path, name, version):
    data = load_movielens(_write_csv(tmp_path / name))
    assert data.version == version
    assert data.items.title[0] == "President, The (1995)"
    assert data.genre_names == ("Action", "Comedy", "Drama")
    np.testing.assert_array_equal(data.ratings.item_id, [10, 20])
    np.testing.assert_array_equal(data.ratings.rating, [3.5, 4])


@pytest.mark.parametrize("block_bytes", [1, 7, 25, 2**24])
def test_ratings_read_in_blocks(tmp_path, monkeypatch, block_bytes):
    """Blocks of any size give the same ratings, and a bad line's number."""
    from polylite import _movielens
    monkeypatch.setattr(_movielens, "BLOCK_BYTES", block_bytes)
    lines = [f"{u}::{10 if u % 2 else 20}::{u % 5 + 0.5}::{u}\n" for u in range(1, 40)]
    data = load_movielens(_write_10m(tmp_path / "a", ratings="".join(lines)))
    np.testing.assert_array_equal(data.ratings.user_id, np.arange(1, 40))
    np.testing.assert_array_equal(data.ratings.rating, np.arange(1, 40) % 5 + 0.5)
    lines[30] = "31::10::x::31\n"
    with pytest.raises(MovieLensFormatError, match=r"ratings.dat, line 31: rating 'x'"):
        load_movielens(_write_10m(tmp_path / "b", ratings="".join(lines)))
    rows = [f"{u},10,4.0,{u}\n" for u in range(1, 30)] + ["5,30,4.0,1\n"]
    with pytest.raises(MovieLensFormatError, match=r"ratings.csv, line 31: item id 30 is "
                                                   r"not in movies.csv"):
        load_movielens(_write_csv(tmp_path / "c", ratings="".join(rows)))


@pytest.mark.parametrize("ratings, movies, match", [
    ("1,10,3.5\n", None, r"ratings.csv, line 2: expected 4 fields"),
    ("1,10,3.5,1\n2,10,5,x\n", None, r"ratings.csv, line 3: timestamp 'x'"),
    ("", None, r"ratings.csv holds no ratings"),
    ("1,10,3.5,1\n", "10,A,Drama\n10,B,Drama\n",
     r"movies.csv, line 3: item id 10 already appears on line 2"),
    ("1,10,3.5,1\n", "10,A\n", r"movies.csv, line 2: expected 3 fields"),
])
def test_malformed_csv_folder(tmp_path, ratings, movies, match):
    with pytest.raises(MovieLensFormatError, match=match):
        load_movielens(_write_csv(tmp_path / "ml-20m", ratings=ratings, movies=movies))


def test_csv_headers(tmp_path):
    folder = _write_csv(tmp_path / "ml-25m")
    (folder / "ratings.csv").write_text("user,movie,rating,time\n1,10,3.5,1\n")
    with pytest.raises(MovieLensFormatError, match=r"ratings.csv, line 1: expected the "
                                                   r"header 'userId,movieId,rating,"
                                                   r"timestamp'"):
        load_movielens(folder)
    (folder / "movies.csv").write_text("10,A,Drama\n")
    with pytest.raises(MovieLensFormatError, match=r"movies.csv, line 1: expected the "
                                                   r"header"):
        load_movielens(folder)


def test_windows_line_ends_and_no_final_newline(tmp_path):
    folder = _write_1m(tmp_path / "ml", ratings="1::10::5::1\r\n2::20::3::2")
    np.testing.assert_array_equal(load_movielens(folder).ratings.timestamp, [1, 2])


# ---- errors ----------------------------------------------------------------------------

def test_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no MovieLens folder at .* \(fetch_movielens"
                                                r"\(\) downloads a release"):
        load_movielens(tmp_path / "nowhere")


def test_folder_of_something_else(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a MovieLens folder: it has none of "
                                                "u.data"):
        load_movielens(tmp_path)


@pytest.mark.parametrize("name", ["u.user", "u.item"])
def test_missing_100k_file(tmp_path, name):
    folder = _write_100k(tmp_path / "ml")
    (folder / name).unlink()
    with pytest.raises(FileNotFoundError, match=f"'{name}' is missing"):
        load_movielens(folder)


@pytest.mark.parametrize("name", ["ratings.dat", "users.dat", "movies.dat"])
def test_missing_1m_file(tmp_path, name):
    folder = _write_1m(tmp_path / "ml")
    (folder / name).unlink()
    with pytest.raises(FileNotFoundError, match=f"'{name}' is missing"):
        load_movielens(folder)


def test_requested_split_missing(tmp_path):
    folder = _write_100k(tmp_path / "ml")
    assert load_movielens(folder).splits.keys() == {"u1"}  # u2..ub absent: skipped
    with pytest.raises(FileNotFoundError, match="'u2.base' is missing"):
        load_movielens(folder, splits=["u2"])
    with pytest.raises(ValueError, match="unknown MovieLens 100K splits"):
        load_movielens(folder, splits=["u9"])
    with pytest.raises(ValueError, match="no official splits"):
        load_movielens(_write_1m(tmp_path / "m1"), splits=["u1"])


@pytest.mark.parametrize("data, match", [
    ("1\t10\t5\t100\n2\t10\t3\n", r"u.data, line 2: expected 4 fields"),
    ("1\t10\t5\t100\n2\t10\t3\t200\t7\n", r"u.data, line 2: expected 4 fields"),
    # One field too few and one too many: the totals agree, the lines do not.
    ("1\t10\t5\n2\t10\t3\t200\t7\n", r"u.data, line 1: expected 4 fields"),
    ("1\t10\t5\t100\n\n2\t10\t3\t200\n", r"u.data, line 2: expected 4 fields"),
    ("1\t10\tfive\t100\n", r"u.data, line 1: rating 'five' is not a number"),
    ("1\t10\t5\t100\n2\t1.5\t3\t200\n", r"u.data, line 2: item id '1.5' is not an "
                                        r"integer"),
    ("1\t10\t5\t100\n2 \t10\t3\tx\n", r"u.data, line 2: user id '2 '|timestamp 'x'"),
    ("1\t10\tnan\t100\n", r"u.data, line 1: rating is not finite"),
    ("", r"u.data holds no ratings"),
    ("1\t10\t5\t100\n3\t10\t3\t200\n", r"u.data, line 2: user id 3 is not in u.user"),
    ("1\t10\t5\t100\n2\t30\t3\t200\n", r"u.data, line 2: item id 30 is not in u.item"),
    ("1\t10\t5\t100\n1\t10\t3\t200\n", r"u.data, line 2: the rating of user 1 for item 10 "
                                       r"already appears on line 1"),
])
def test_malformed_100k_ratings(tmp_path, data, match):
    folder = _write_100k(tmp_path / "ml", data=data, splits=False)
    with pytest.raises(MovieLensFormatError, match=match):
        load_movielens(folder)


def test_malformed_1m_ratings(tmp_path):
    folder = _write_1m(tmp_path / "ml", ratings="1::10::5::1\n2::20:3::2\n")
    with pytest.raises(MovieLensFormatError, match=r"ratings.dat, line 2: expected 4 "
                                                   r"fields separated by '::'"):
        load_movielens(folder)


@pytest.mark.parametrize("user, item, match", [
    ("1|24|M|technician\n", None, r"u.user, line 1: expected 5 fields"),
    ("1|24|M|technician|1\n1|30|F|other|2\n", None,
     r"u.user, line 2: user id 1 already appears on line 1"),
    ("1|old|M|technician|1\n2|30|F|other|2\n", None, r"u.user, line 1: age 'old' is not"),
    (None, f"10|A|||x|{GENRE_FLAGS}\n20|B|||x|{GENRE_FLAGS[:-1]}2\n",
     r"u.item, line 2: genre flags must be 0 or 1"),
    (None, f"10|A|||x|{GENRE_FLAGS}|0\n", r"u.item, line 1: expected 24 fields"),
])
def test_malformed_100k_tables(tmp_path, user, item, match):
    folder = _write_100k(tmp_path / "ml", user=user, item=item, splits=False)
    with pytest.raises(MovieLensFormatError, match=match):
        load_movielens(folder)


def test_malformed_1m_tables(tmp_path):
    folder = _write_1m(tmp_path / "ml", movies="10::A (1995)::Action|Cartoon\n")
    with pytest.raises(MovieLensFormatError, match=r"movies.dat, line 1: unknown genre "
                                                   r"'Cartoon'"):
        load_movielens(folder)
    folder = _write_1m(tmp_path / "m2", users="1::F::1::ten::48067\n")
    with pytest.raises(MovieLensFormatError, match=r"users.dat, line 1: occupation 'ten'"):
        load_movielens(folder)


def test_split_disagreeing_with_the_ratings(tmp_path):
    folder = _write_100k(tmp_path / "ml")
    (folder / "u1.test").write_text("2\t10\t4\t200\n")  # rated 3 in u.data
    with pytest.raises(MovieLensFormatError, match=r"u1.test, line 1: the rating of user 2 "
                                                   r"for item 10 is not the one in u.data"):
        load_movielens(folder)
    (folder / "u1.test").write_text("2\t20\t4\t200\n")  # not rated at all
    with pytest.raises(MovieLensFormatError, match=r"u1.test, line 1"):
        load_movielens(folder)
    (folder / "u1.test").write_text("2\t10\t3\t200\n2\t10\t3\t200\n")  # twice
    with pytest.raises(MovieLensFormatError, match=r"u1.test, line 2: the rating of user 2 "
                                                   r"for item 10 already appears on line 1"):
        load_movielens(folder)
