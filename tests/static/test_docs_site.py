"""The documentation site builds in strict mode (a broken link or anchor fails), and its front
page renders in a real browser: headless Chromium (Debian's package; scripts/test installs it)
loads the built page, its DOM holds the navigation to every page, and the screenshot it takes
is kept in site/front-page.png for a person to look at."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = str(Path(sys.executable).with_name("mkdocs"))
SCREENSHOT = ROOT / "site" / "front-page.png"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [MKDOCS, "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    browser = shutil.which("chromium")
    assert browser, "chromium is needed: scripts/test installs Debian's package"
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the raw scanlines of a PNG (filter bytes included)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, width, height, idat = 8, 0, 0, b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    return width, height, zlib.decompress(idat)


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = [next(iter(entry.values())) for entry in nav]
    on_disk = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(pages) == on_disk  # every page is in the nav, and only those
    for page in pages:
        built = site / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert built.is_file(), page


def test_the_front_page_renders_in_chromium(site: Path) -> None:
    url = (site / "index.html").as_uri()
    dom = _chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr
    for text in ("runbroker", "Getting started", "The tasks file", "Settings", "How it works"):
        assert text in dom.stdout, text
    assert 'class="md-header' in dom.stdout  # Material's layout, not a bare page
    SCREENSHOT.parent.mkdir(exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    shot = _chromium(
        "--hide-scrollbars", "--window-size=1280,900", f"--screenshot={SCREENSHOT}", url
    )
    assert shot.returncode == 0, shot.stderr
    width, height, pixels = _png_pixels(SCREENSHOT.read_bytes())
    assert (width, height) == (1280, 900)
    assert len(set(pixels)) > 32  # text and colour, not a blank page
