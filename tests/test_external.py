"""The external check on the real held-out set: PyRIT's refusal-scorer CSVs, read through
`load_pyrit_refusal` from PyRIT's wheel as the package registry serves it (`pip download --no-deps`:
none of PyRIT's dependencies), and the shipped judge's figures on it, which must be the ones
`data/judge/external.csv` keeps. The rows are only read, never trained or tuned on."""
import subprocess, sys

import pandas as pd
import pytest

from orbench_ml.judge import external_check
from orbench_ml.judge_data import load_pyrit_refusal
from orbench_ml.lang import data_file

PYRIT = 'pyrit==1.1.0'

@pytest.fixture(scope='module')
def pyrit_wheel(tmp_path_factory):
    "PyRIT's wheel, fetched from the package registry"
    d = tmp_path_factory.mktemp('pyrit')
    got = subprocess.run([sys.executable, '-m', 'pip', 'download', PYRIT, '--no-deps', '-q', '-d', str(d)],
                         capture_output=True, text=True)
    assert got.returncode == 0, f'pip download {PYRIT} failed (the external check reads its wheel from the package registry): {got.stderr.strip()[-300:]}'
    return next(d.glob('pyrit-*.whl'))

@pytest.fixture(scope='module')
def held(pyrit_wheel):
    "PyRIT's refusal-scorer replies, read once from the wheel"
    return load_pyrit_refusal(pyrit_wheel)

def test_the_real_set_reads(held):
    assert len(held) == 169 and held.reply_id.is_unique
    assert held.label.value_counts().to_dict() == {'refuse': 109, 'answer': 60}
    assert held.reply_id.str.rsplit('-', n=1).str[0].value_counts().to_dict() == {'pyrit-refusal': 105, 'pyrit-refusal_extra': 64}
    assert (held.response.str.strip() != '').all() and (held.prompt.str.strip() != '').all()

def test_the_kept_figures_are_the_shipped_judges(held):
    got = external_check(held).round(4)
    kept = pd.read_csv(data_file('judge/external.csv'))
    pd.testing.assert_frame_equal(got, kept, check_dtype=False, obj='data/judge/external.csv (stale: rerun judge.measure_external)')
