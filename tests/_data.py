"""Where the tests find MovieLens: in polylite's data folder, where
``fetch_movielens`` keeps it (``$POLYLITE_DATA``, else ``~/polylite_data``), else in
``../shared/data/movielens`` next to the source tree.  The tests never download it; a
test that needs a release it cannot find skips, saying how to download it."""
from pathlib import Path

from polylite.datasets import get_data_home

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens"
# The folder and the ratings file of each release the tests read.
RELEASES = {"100k": ("ml-100k", "u.data"), "1m": ("ml-1m", "ratings.dat")}


def movielens_folder(version="100k"):
    """The folder of the release that holds its ratings, or None."""
    name, ratings = RELEASES[version]
    for parent in (Path(get_data_home()), SHARED):
        if (parent / name / ratings).exists():
            return parent / name
    return None


def movielens_missing(version="100k"):
    """Why a test of the release skips: where it looked, and how to download it."""
    return (f"MovieLens {version.upper()} not found in {get_data_home()} (POLYLITE_DATA) "
            f"or ../shared/data/movielens; download it once with python -c \"from "
            f"polylite.datasets import fetch_movielens; fetch_movielens('{version}')\"")
