"""Test-session settings: model results, figures and the reply cache of the notebooks and tests go to a
temporary folder, so that running the suite never rewrites the results and figures a checkout ships."""
import os, tempfile
from pathlib import Path

_scratch = Path(tempfile.mkdtemp(prefix='orbench_tests_'))
for var, sub in (('ORBENCH_RESULTS', 'results'), ('ORBENCH_FIGURES', 'figures'), ('ORBENCH_CACHE', 'cache')):
    os.environ.setdefault(var, str(_scratch/sub))

# The longest tests (papermill runs, the pipeline, every notebook) start first, so that no worker is left
# alone with one of them at the end of the run.
FIRST = ('test_stages_e2e.py', 'test_batch_evaluate.py', 'test_notebooks.py', 'test_inspect.py')

def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else len(FIRST))
