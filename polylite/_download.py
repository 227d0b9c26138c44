"""The data folder where polylite keeps the data sets it downloads, and the download of
an archive into it: written to a temporary file beside its final name, checked against
its published size and checksum, then renamed, so that an interrupted or corrupted
download never leaves a file that looks complete."""
import hashlib
import http.client
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile

DATA_ENV = "POLYLITE_DATA"
CHUNK = 2**20  # bytes read and hashed at a time


def get_data_home(data_home=None):
    """The folder where polylite keeps the data sets it downloads.

    Parameters
    ----------
    data_home : str, path-like or None, default=None
        The folder to use.  None: the folder named by the environment variable
        ``POLYLITE_DATA`` if it is set, else ``polylite_data`` in the user's home folder
        (``~/polylite_data``).

    Returns
    -------
    path : str
        The folder as an absolute path, ``~`` expanded.  It is created by the first
        download, not here.

    Examples
    --------
    >>> from polylite.datasets import get_data_home
    >>> get_data_home("/data/polylite")
    '/data/polylite'
    """
    if data_home is None:
        data_home = os.environ.get(DATA_ENV) or os.path.join("~", "polylite_data")
    return os.path.abspath(os.path.expanduser(os.fspath(data_home)))


class DownloadError(OSError):
    """The server could not be reached or the transfer broke off (the partial file is
    removed)."""


class ArchiveError(OSError):
    """An archive is truncated or corrupted: its size, checksum or contents are not the
    published ones (the file is removed, so that the next attempt fetches it again)."""


def download(url, path, *, size=None, sha256=None, md5=None, progress=True, timeout=60):
    """Download ``url`` to ``path`` and check it (see :func:`check_archive`).

    The bytes go to a temporary file in ``path``'s folder (created if need be), renamed
    to ``path`` once complete and checked; a failed or bad download leaves nothing.
    ``progress`` shows a tqdm bar on stderr.  Raises DownloadError when the server cannot
    be reached or the transfer stops early, ArchiveError when the file is not the
    expected one.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, part = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".part",
                                dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            _transfer(url, out, os.path.basename(path), size, progress, timeout)
        check_archive(part, size=size, sha256=sha256, md5=md5, name=url)
        os.replace(part, path)
    finally:
        if os.path.exists(part):
            os.remove(part)


def _transfer(url, out, label, size, progress, timeout):
    """Copy the body of ``url`` into the open file ``out``, with a progress bar."""
    from tqdm import tqdm
    try:
        response = urllib.request.urlopen(url, timeout=timeout)
    except OSError as exc:  # URLError, HTTPError, timeouts
        raise DownloadError(f"could not download {url}: {_reason(exc)}") from exc
    with response:
        length = response.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else size
        received = 0
        with tqdm(total=length, desc=label, unit="B", unit_scale=True,
                  unit_divisor=1024, file=sys.stderr, disable=not progress,
                  leave=False) as bar:
            while True:
                try:
                    block = response.read(CHUNK)
                except (OSError, http.client.HTTPException) as exc:
                    raise DownloadError(f"the download of {url} broke off after "
                                        f"{received:,} bytes: {_reason(exc)}") from exc
                if not block:
                    break
                out.write(block)
                received += len(block)
                bar.update(len(block))
    if length is not None and received < length:
        raise DownloadError(f"the download of {url} broke off after {received:,} of "
                            f"{length:,} bytes")


def _reason(exc):
    """What went wrong: "HTTP Error 404: Not Found", "[Errno 111] Connection refused"."""
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc,
                                                                 urllib.error.HTTPError):
        exc = exc.reason
    return str(exc) or type(exc).__name__


def check_archive(path, *, size=None, sha256=None, md5=None, name=None):
    """Raise ArchiveError, after removing the file, unless ``path`` has the given size
    (in bytes) and SHA-256 or MD5 digest (hexadecimal; those given are checked)."""
    name = name or path
    actual = os.path.getsize(path)
    problem = None
    if size is not None and actual != size:
        problem = (f"{name} is truncated: {actual:,} bytes instead of {size:,}"
                   if actual < size else
                   f"{name} is {actual:,} bytes instead of {size:,}")
    else:
        for algorithm, expected in (("sha256", sha256), ("md5", md5)):
            if expected is None:
                continue
            digest = hashlib.new(algorithm)
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(CHUNK), b""):
                    digest.update(block)
            if digest.hexdigest() != expected.lower():
                problem = (f"{name} is corrupted: its {algorithm.upper()} digest is "
                           f"{digest.hexdigest()}, the published one {expected}")
                break
    if problem is not None:
        os.remove(path)
        raise ArchiveError(problem)


def extract_folder(archive, member, folder):
    """Extract the folder ``member`` of the zip ``archive`` as ``folder``.

    The archive is extracted into a temporary folder beside ``folder`` and ``member``
    renamed to ``folder`` once complete, so that ``folder`` exists only whole.  Raises
    ArchiveError (the archive removed) if the archive is unreadable or lacks ``member``.
    """
    parent = os.path.dirname(os.path.abspath(folder))
    scratch = tempfile.mkdtemp(prefix=".extract-", dir=parent)
    try:
        try:
            with zipfile.ZipFile(archive) as z:
                z.extractall(scratch)
        except (zipfile.BadZipFile, EOFError) as exc:
            os.remove(archive)
            raise ArchiveError(f"{archive} is not a readable zip archive: {exc}") from exc
        source = os.path.join(scratch, member)
        if not os.path.isdir(source):
            os.remove(archive)
            raise ArchiveError(f"{archive} does not hold the folder {member!r}")
        try:
            os.rename(source, folder)
        except OSError:
            if not os.path.isdir(folder):  # (else another process extracted it)
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
