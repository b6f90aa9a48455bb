"""The derived data files under models/ are what their make_data.py scripts produce."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


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


def test_breast_cancer_table_is_make_data_of_the_copied_source(tmp_path, monkeypatch):
    folder = ROOT / "models" / "logistic_regression" / "breast_cancer"
    make = _load(folder / "make_data.py")
    monkeypatch.setattr(make, "OUT", tmp_path / "breast_cancer.csv")
    make.main()
    made = (tmp_path / "breast_cancer.csv").read_bytes()
    assert made == (folder / "breast_cancer.csv").read_bytes()
    digest = hashlib.sha256((folder / "breast_cancer_wdbc.csv").read_bytes()).hexdigest()
    assert digest == "4a3c7b25bbe23b3746f1be7136452435d2d3eb921124d31aa194c2c19d69f376"
    table = np.loadtxt(folder / "breast_cancer.csv", delimiter=",", skiprows=1)
    assert table.shape == (569, 31) and table[:, 0].sum() == 212  # 212 malignant


def test_simulated_regression_is_reproducible(tmp_path):
    simulate = _load(ROOT / "models" / "linear_regression" / "simulate.py")
    a = simulate.write(tmp_path / "a.csv", 1000).read_bytes()
    b = simulate.write(tmp_path / "b.csv", 1000).read_bytes()
    assert a == b and a.startswith(b"y,X.1,X.2,X.3,X.4\n")
    table = np.loadtxt(tmp_path / "a.csv", delimiter=",", skiprows=1)
    assert table.shape == (1000, 5)
    # least squares recovers the simulated coefficients
    X = np.column_stack([np.ones(1000), table[:, 1:]])
    coef = np.linalg.lstsq(X, table[:, 0], rcond=None)[0]
    assert np.allclose(coef, [simulate.ALPHA, *simulate.BETA], atol=0.6)
