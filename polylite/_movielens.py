"""Readers of the MovieLens 100K and 1M folders (GroupLens Research).

polylite never ships or downloads MovieLens (its licence forbids redistribution): the
readers take the path of a folder the user obtained from GroupLens.  Every line is
checked; a malformed one is reported with its file and line number.
"""
import os
from dataclasses import dataclass

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_movielens", "MovieLens", "MovieLensFormatError"]

# The 19 genre flags of u.item, in u.genre order, and the 18 genres of movies.dat.
GENRES_100K = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy",
               "Crime", "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror",
               "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")
GENRES_1M = GENRES_100K[1:]
SPLITS_100K = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")


class MovieLensFormatError(ValueError):
    """A MovieLens file is malformed (the message names the file and line)."""


@dataclass(frozen=True, repr=False)
class MovieLens:
    """A MovieLens release read by :func:`load_movielens` (see there for the tables).

    Attributes
    ----------
    ratings, users, items : Bunch
        Tables: Bunch objects of equal-length arrays, one key per column.
    genre_names : tuple of str
        The columns of ``items.genres``.
    splits : dict
        Split name -> ``(train_index, test_index)``, row indices into ``ratings``.
    version : {"100k", "1m"}
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


def load_movielens(path, *, splits=None):
    """Read a MovieLens 100K or 1M folder: ratings, users, items and official splits.

    The release is recognised by its files: ``u.data``, ``u.user``, ``u.item`` (100K) or
    ``ratings.dat``, ``users.dat``, ``movies.dat`` (1M).  Tables are returned as
    :class:`~sklearn.utils.Bunch` objects of equal-length 1-D arrays (one key per column),
    the table format :class:`polylite.preprocessing.FieldEncoder` reads (and
    ``pandas.DataFrame(table)`` makes a data frame of).

    Parameters
    ----------
    path : str or path-like
        The ``ml-100k`` or ``ml-1m`` folder, as distributed by GroupLens.
    splits : sequence of str or None, default=None
        MovieLens 100K only: which official train/test splits to read (``"u1"`` ...
        ``"u5"``, ``"ua"``, ``"ub"``; each from its ``.base`` and ``.test`` files).
        None reads every split whose two files are present; a split named here must be
        present.  MovieLens 1M has no official split.

    Returns
    -------
    data : MovieLens
        - ``ratings``: Bunch of ``user_id``, ``item_id`` (int64, as in the files),
          ``rating`` (float64) and ``timestamp`` (int64, seconds since 1970), each of
          shape (n_ratings,), in file order.
        - ``users``: Bunch of ``user_id``, ``age`` (int64; the age in years for 100K, the
          age-group code 1, 18, 25, 35, 45, 50 or 56 for 1M), ``gender`` ("M"/"F"),
          ``occupation`` (the name for 100K, the code 0-20 for 1M) and ``zip_code``
          (str), each of shape (n_users,).
        - ``items``: Bunch of ``item_id``, ``title`` (str), ``release_year`` (float64,
          NaN when unknown; 100K from the release date, 1M from the title) and ``genres``
          (uint8 flags of shape (n_items, n_genres)).
        - ``genre_names``: tuple of str, the columns of ``items.genres``.
        - ``splits``: dict mapping a split name to ``(train_index, test_index)``, int64
          row indices into ``ratings`` (empty for 1M).
        - ``version``: "100k" or "1m".

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
        raise FileNotFoundError(f"no MovieLens folder at {path!r}")
    if os.path.exists(os.path.join(path, "u.data")):
        return _load_100k(path, splits)
    if any(os.path.exists(os.path.join(path, name))
           for name in ("ratings.dat", "users.dat", "movies.dat")):
        if splits:
            raise ValueError(f"MovieLens 1M has no official splits; got splits={splits!r}")
        return _load_1m(path)
    raise FileNotFoundError(f"{path!r} is not a MovieLens 100K or 1M folder: it has "
                            f"neither u.data nor ratings.dat/users.dat/movies.dat")


# ---- reading lines ---------------------------------------------------------------------

def _required(folder, name):
    file = os.path.join(folder, name)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"MovieLens file {name!r} is missing from {folder!r}")
    return file


def _lines(file, encoding):
    """The lines of a text file without line ends; one final empty line is dropped."""
    with open(file, "rb") as f:
        content = f.read()
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.rstrip(b"\r").decode(encoding) for line in lines]


def _split_lines(file, sep, n_fields, encoding="latin-1"):
    """Each line of ``file`` split on ``sep`` into exactly ``n_fields`` fields."""
    rows = [line.split(sep) for line in _lines(file, encoding)]
    for number, fields in enumerate(rows, 1):
        if len(fields) != n_fields:
            raise MovieLensFormatError(
                f"{file}, line {number}: expected {n_fields} fields separated by {sep!r}, "
                f"found {len(fields)}")
    return rows


def _numbers(file, rows, column, name, integer=True):
    """Column ``column`` of the split ``rows`` as int64 (or float64), checked."""
    convert = int if integer else float
    values = np.empty(len(rows), dtype=np.int64 if integer else np.float64)
    for number, fields in enumerate(rows, 1):
        try:
            values[number - 1] = convert(fields[column])
        except ValueError:
            raise MovieLensFormatError(f"{file}, line {number}: {name} {fields[column]!r} "
                                       f"is not {'an integer' if integer else 'a number'}"
                                       ) from None
    return values


def _read_ratings(file, sep):
    """user_id, item_id, rating, timestamp of a ratings file.

    A fast vectorised parse; when any check fails (a line without exactly three
    separators, a token that is not a number, an id that is not an integer), the file is
    read again line by line to report the first malformed line.
    """
    with open(file, "rb") as f:
        content = f.read()
    raw = np.frombuffer(content, dtype=np.uint8)
    newlines = np.flatnonzero(raw == ord("\n"))
    n_lines = newlines.size + (0 if content.endswith(b"\n") or not content else 1)
    if n_lines == 0:
        raise MovieLensFormatError(f"{file} holds no ratings")
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
        _locate_bad_rating(file, sep)  # raises with the line number
        raise  # pragma: no cover - _locate_bad_rating always raises here
    return (table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2],
            table[:, 3].astype(np.int64))


def _locate_bad_rating(file, sep):
    """Raise MovieLensFormatError for the first malformed line of a ratings file."""
    rows = _split_lines(file, sep, 4)
    for column, name in enumerate(("user id", "item id")):
        _numbers(file, rows, column, name)
    ratings = _numbers(file, rows, 2, "rating", integer=False)
    _numbers(file, rows, 3, "timestamp")
    bad = np.flatnonzero(~np.isfinite(ratings))
    if bad.size:
        raise MovieLensFormatError(f"{file}, line {bad[0] + 1}: rating is not finite")
    raise MovieLensFormatError(f"{file}: malformed")  # pragma: no cover


def _check_unique(file, keys, describe):
    """Raise unless ``keys`` are unique; ``describe(row)`` names the key of a row."""
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    if np.any(counts > 1):
        lines = np.flatnonzero(keys == keys[first[counts > 1][0]])[:2]
        raise MovieLensFormatError(f"{file}, line {lines[1] + 1}: {describe(lines[1])} "
                                   f"already appears on line {lines[0] + 1}")


def _id_check(file, ids, what):
    _check_unique(file, ids, lambda row: f"{what} {ids[row]}")


def _pair_check(file, ratings, keys):
    _check_unique(file, keys, lambda row: f"the rating of user {ratings.user_id[row]} for "
                                          f"item {ratings.item_id[row]}")


def _check_known(file, ids, known, what, table_file):
    unknown = np.flatnonzero(~np.isin(ids, known))
    if unknown.size:
        raise MovieLensFormatError(f"{file}, line {unknown[0] + 1}: {what} {ids[unknown[0]]} "
                                   f"is not in {os.path.basename(table_file)}")


def _ratings_bunch(file, sep, users_file, user_ids, items_file, item_ids):
    user, item, rating, timestamp = _read_ratings(file, sep)
    _check_known(file, user, user_ids, "user id", users_file)
    _check_known(file, item, item_ids, "item id", items_file)
    return Bunch(user_id=user, item_id=item, rating=rating, timestamp=timestamp)


def _year(text):
    """The four-digit year that ends ``text`` (a date or "Title (1995)"), or NaN."""
    text = text.strip().rstrip(")")
    tail = text[-4:]
    return float(tail) if len(tail) == 4 and tail.isdigit() else np.nan


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
    rows = _split_lines(items_file, "::", 3)
    genres = np.zeros((len(rows), len(GENRES_1M)), dtype=np.uint8)
    column = {name: j for j, name in enumerate(GENRES_1M)}
    for number, r in enumerate(rows, 1):
        for name in filter(None, r[2].split("|")):
            if name not in column:
                raise MovieLensFormatError(f"{items_file}, line {number}: unknown genre "
                                           f"{name!r}")
            genres[number - 1, column[name]] = 1
    items = Bunch(item_id=_numbers(items_file, rows, 0, "item id"),
                  title=np.array([r[1] for r in rows]),
                  release_year=np.array([_year(r[1]) for r in rows]), genres=genres)
    _id_check(items_file, items.item_id, "item id")
    ratings = _ratings_bunch(ratings_file, "::", users_file, users.user_id, items_file,
                             items.item_id)
    return MovieLens(ratings=ratings, users=users, items=items, genre_names=GENRES_1M,
                     splits={}, version="1m")
