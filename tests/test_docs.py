"""The notebooks as documentation, and a checkout that runs stay clean: the index links every stage
notebook (and every link resolves), the notebooks that document results carry outputs that are the
same in every clone, and what runs write is either byte-stable and tracked or git-ignored."""
import json, re, subprocess
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/'nbs'
DOCUMENTED = ('index', '06_evaluate', '08_report')   # written back by `python -m orbench_ml.pipeline`

def markdown(nb:str)->str:
    cells = json.loads((NBS/f'{nb}.ipynb').read_text(encoding='utf-8'))['cells']
    return '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'markdown')

def test_index_links_every_stage_notebook_and_every_link_resolves():
    links = re.findall(r'\]\(([^)#\s]+)\)', markdown('index'))
    local = [l for l in links if '://' not in l]
    missing = [l for l in local if not (NBS/l).exists()]
    assert not missing, f'index links to files that do not exist: {missing}'
    stages = {p.name for p in NBS.glob('*.ipynb') if p.name != 'index.ipynb'}
    assert stages <= set(local), f'index does not link {sorted(stages - set(local))}'

@pytest.mark.parametrize('nb', DOCUMENTED)
def test_documented_notebook_carries_outputs_the_same_in_every_clone(nb):
    cells = json.loads((NBS/f'{nb}.ipynb').read_text(encoding='utf-8'))['cells']
    outputs = [o for c in cells if c['cell_type'] == 'code' for o in c['outputs']]
    assert outputs, f'{nb}: no outputs; run python -m orbench_ml.pipeline'
    text = json.dumps(outputs)
    assert str(ROOT) not in text and '/tmp/' not in text, f'{nb}: an output names a path of this machine'
    assert not [o for o in outputs if o['output_type'] == 'error' or o.get('name') == 'stderr'], f'{nb}: error or stderr output'
    assert all(c.get('execution_count') is None for c in cells if c['cell_type'] == 'code')   # as nbdev_clean leaves them

def ignored(*paths)->set:
    r = subprocess.run(['git', 'check-ignore', '--no-index', *paths], cwd=ROOT, capture_output=True, text=True)
    return set(r.stdout.split())

def test_run_outputs_are_ignored_and_shipped_outputs_are_not():
    runs = ['out.ipynb', 'gemma.ipynb', 'out/06_evaluate.ipynb', 'out/pipeline_state.json', 'data/results/gemma3-4b/v2/run.json',
            'data/cache/replies.sqlite', 'figures/gemma3-4b/v2/rates_by_lang.png', 'figures/report/xstest/leaderboard.md',
            'figures/keyword-baseline/xstest/rates_by_lang.png', 'figures/keyword-baseline/v2/filtered/limit=60/rates_by_lang.png']
    shipped = ['out/.gitkeep', 'figures/04_by_method.png', 'figures/leaderboard.md', 'figures/keyword-baseline/v2/rates_by_lang.png',
               'nbs/06_evaluate.ipynb', 'data/benchmark/v0/README.md', 'data/benchmark/v1/README.md', 'data/benchmark/v2/README.md']
    assert ignored(*runs) == set(runs)
    assert ignored(*shipped) == set()
