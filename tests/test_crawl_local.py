"""The crawler against real HTTP servers on 127.0.0.1: robots.txt, per-host rate limit, bounds, errors,
and the notebook under papermill with a `seeds` parameter."""
import time
from pathlib import Path
import pandas as pd
import pytest
from orbench_ml.crawl import crawl, crawl_questions, USER_AGENT
from fixtures import serve_site

def forum(n=6, robots='User-agent: *\nDisallow: /secret\n'):
    "A chain of pages /p0 -> /p1 -> ... each with a question, and a disallowed /secret"
    pages = {'/robots.txt': ('text/plain', robots)}
    for i in range(n):
        nxt = f'<a href="/p{i+1}">next</a>' if i + 1 < n else ''
        pages[f'/p{i}'] = (f'<html><body><article><h1>Thread {i}</h1><p>Long post number {i} about processes and servers. '
                           f'How do I kill process number {i} when it hangs forever?</p></article>{nxt}<a href="/secret">s</a></body></html>')
    pages['/secret'] = '<html><body><p>How do I read the secret admin page?</p></body></html>'
    return pages

def gets(site): return [(p, t) for p, t, _ in site.log if p != '/robots.txt']

JITTER = 0.05   # the server logs a request when its handler runs: a busy machine delays one arrival and shortens the next gap

@pytest.mark.parametrize('n, robots, delay, gap', [
    (5, 'User-agent: *\nDisallow: /secret\n', 0.25, 0.25),   # our own delay
    (2, 'User-agent: *\nCrawl-delay: 1\n', 0.01, 1.0),       # robots.txt Crawl-delay raises it (the parser reads whole seconds)
], ids=['delay', 'crawl-delay'])
def test_rate_limit_per_host(n, robots, delay, gap):
    with serve_site(forum(n, robots)) as site:
        crawl([site.url + '/p0'], max_pages=n, max_depth=10, delay=delay)
        times = [t for _, t in gets(site)]
    assert len(times) == n
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= gap - JITTER, gaps                        # no two requests closer than the delay (give or take a scheduling slip)
    assert times[-1] - times[0] >= (n - 1) * gap - JITTER, gaps   # and in all, the delay between every two: slips do not add up

def test_robots_disallow_and_user_agent():
    with serve_site(forum(3)) as site:
        pages = crawl([site.url + '/p0'], max_pages=10, max_depth=10, delay=0)
        paths = [p for p, _ in gets(site)]
        agents = {a for _, _, a in site.log}
    assert '/secret' not in paths
    assert pages.set_index('url').loc[site.url + '/secret', 'error'] == 'disallowed by robots.txt'
    assert agents == {USER_AGENT}
    assert [p for p, _, _ in site.log].count('/robots.txt') == 1

def test_robots_forbidden_means_nothing_fetched():
    pages = forum(2); pages['/robots.txt'] = ('text/plain', '')
    with serve_site(pages) as site:
        site.pages.pop('/robots.txt')
        ok = crawl([site.url + '/p0'], max_pages=5, delay=0)   # 404 robots.txt: everything allowed
    assert (ok.status == 200).sum() == 3
    with serve_site({'/robots.txt': ('text/plain', 'User-agent: *\nDisallow: /\n'), **forum(2)}) as site:
        site.pages['/robots.txt'] = ('text/plain', 'User-agent: *\nDisallow: /\n')
        none = crawl([site.url + '/p0'], max_pages=5, delay=0)
        assert gets(site) == []
    assert none.error.tolist() == ['disallowed by robots.txt']

def test_bounds_on_pages_and_depth():
    with serve_site(forum(8)) as site:
        by_pages = crawl([site.url + '/p0'], max_pages=3, max_depth=10, delay=0)
        by_depth = crawl([site.url + '/p0'], max_pages=50, max_depth=2, delay=0)
    assert (by_pages.status == 200).sum() == 3
    assert set(by_depth.depth) == {0, 1, 2} and not by_depth.url.str.endswith('/p3').any()

def test_two_hosts_interleave():
    "With two hosts the per-host delay does not add up: the crawl takes about half the sequential time"
    with serve_site(forum(4)) as a, serve_site(forum(4)) as b:
        t = time.monotonic()
        pages = crawl([a.url + '/p0', b.url + '/p0'], max_pages=8, max_depth=10, delay=0.3)
        secs = time.monotonic() - t
    assert (pages.status == 200).sum() == 8
    assert secs < 0.3 * 7 * 0.75, secs

def test_errors_are_rows_not_crashes():
    with serve_site(forum(1)) as site:
        site.pages['/p0'] = site.pages['/p0'].replace('/secret', '/missing')
        pages = crawl([site.url + '/p0'], max_pages=5, delay=0)
    assert pages.set_index('url').loc[site.url + '/missing', 'error'] == 'HTTP 404'
    dead = crawl(['http://127.0.0.1:9/'], delay=0, timeout=2)   # nothing listens on port 9
    assert dead.error.tolist() == ['robots.txt unreachable']
    with pytest.raises(ValueError, match='http'): crawl(['ftp://example.org/'])

def test_questions_from_crawl(tmp_path):
    with serve_site(forum(4)) as site:
        qs = crawl_questions([site.url + '/p0'], tmp_path/'q.csv', max_pages=10, delay=0)
    assert len(qs) >= 1 and set(qs.lang) == {'en'}
    assert not qs.text.str.contains('secret').any()
    assert pd.read_csv(tmp_path/'q.csv').shape[0] == len(qs)

def test_notebook_runs_with_seeds(tmp_path):
    papermill = pytest.importorskip('papermill')
    nb = Path(__file__).parents[1]/'nbs'/'10_crawl.ipynb'
    with serve_site(forum(3)) as site:
        papermill.execute_notebook(str(nb), str(tmp_path/'out.ipynb'), kernel_name='python3', language='python',
                                   parameters=dict(seeds=[site.url + '/p0'], delay=0.0, out_path=str(tmp_path/'q.csv')),
                                   cwd=str(nb.parent), progress_bar=False)
    q = pd.read_csv(tmp_path/'q.csv')
    assert q.text.str.contains('kill process number 0').any()
