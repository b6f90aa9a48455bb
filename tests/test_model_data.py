"""The derived data files under models/ are what their make_data.py scripts produce."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bpfa_crop_is_the_decoded_png():
    make = _load(ROOT / "models" / "bpfa" / "make_data.py")
    pixels = np.array(make.read_gray_png(ROOT / "models" / "bpfa" / "data" / "camera.png"))
    assert pixels.shape == (512, 512) and pixels.min() == 0 and pixels.max() == 255
    crop = np.loadtxt(ROOT / "models" / "bpfa" / "data" / "camera128.csv", delimiter=",",
                      skiprows=1)  # fmt: skip
    np.testing.assert_array_equal(crop, pixels[make.ROWS, make.COLS])
    # camera_64.csv (from the same data collection, decoded independently) holds the rounded
    # 8 x 8 block means of the whole image
    blocks = pixels.reshape(64, 8, 64, 8).mean(axis=(1, 3))
    reference = np.loadtxt(ROOT / "models" / "bpfa" / "data" / "camera_64.csv", delimiter=",",
                           skiprows=1)  # fmt: skip
    assert np.max(np.abs(blocks - reference)) <= 0.5
