"""Every notebook in nbs/ runs top to bottom as `nbdev_test` runs it: one pytest case per notebook,
so that a failing notebook fails the suite and names itself."""
import re
from pathlib import Path
import nbformat, pytest
from papermill.translators import PythonTranslator
from nbdev.config import get_config
from nbdev.test import test_nb as run_notebook

NBS = sorted(p for p in Path(get_config().nbs_path).glob('*.ipynb') if not p.name.startswith('_'))

@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_notebook_runs(nb):
    skip_flags = get_config().tst_flags.split()
    ok, secs = run_notebook(nb, skip_flags=skip_flags, showerr=True)
    assert ok, f'{nb.name} failed (see the traceback above)'

PARAMETERISED = ('02_embed', '03_extract', '04_rewrite', '05_judge', '06_evaluate', '07_select', '08_report', '10_crawl')
STAGES = [p for p in NBS if p.stem in PARAMETERISED]

@pytest.mark.parametrize('nb', STAGES, ids=[p.stem for p in STAGES])
def test_parameters_cell_is_tagged_and_parsed_by_papermill(nb):
    "papermill finds the cell tagged `parameters` and reads every parameter in it (a bad line is dropped silently)"
    cells = [c for c in nbformat.read(nb, as_version=4).cells if 'parameters' in c.metadata.get('tags', [])]
    assert len(cells) == 1, f'{nb.name}: {len(cells)} cells tagged parameters'
    assigned = re.findall(r'^(\w+)\s*=', cells[0].source, re.M)
    parsed = [p.name for p in PythonTranslator.inspect(cells[0])]
    assert assigned and parsed == assigned, f'{nb.name}: papermill parsed {parsed} of {assigned}'
