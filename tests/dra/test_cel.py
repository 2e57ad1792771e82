"""The CEL layer: Kubernetes functions DRA selectors use, compile errors, and memoisation."""

from __future__ import annotations

import re

import pytest

from bench.bench_dra import CLAIM, GPU_CLASS, slices
from policies.dra import cel
from policies.dra.allocate import check
from policies.dra.parse_claims import parse_claim
from policies.dra.parse_slices import parse_slice
from policies.dra.pools import DraInventory

DEVICE = parse_slice({"spec": {
    "driver": "gpu.nvidia.com", "nodeName": "n",
    "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
    "devices": [{"name": "gpu-0", "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "driverVersion": {"version": "580.105.8"}, "index": {"int": 3},
        "migCapable": {"bool": True}, "resource.kubernetes.io/pcieRoot": {"string": "pci0000:10"}},
        "capacity": {"memory": {"value": "81559Mi"}}}]}}).devices[0]

# (expression, matches, error substring) on an H100 device.
TABLE = [
    ("device.driver == 'gpu.nvidia.com'", True, ""),
    ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", True, ""),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')", True, ""),
    ("device.attributes['gpu.nvidia.com'].productName.upperAscii().endsWith('HBM3')", True, ""),
    ("device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA (H|B)[0-9]+')", True, ""),
    ("device.attributes['gpu.nvidia.com'].productName.split(' ')[1] == 'H100'", True, ""),
    ("device.attributes['gpu.nvidia.com'].index == 3", True, ""),
    ("device.attributes['gpu.nvidia.com'].migCapable", True, ""),
    ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:10'", True, ""),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True, ""),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0", False, ""),
    ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('81558Mi'))", True, ""),
    ("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('81559Mi'))", False, ""),
    ("device.capacity['gpu.nvidia.com'].memory == quantity('81559Mi')", True, ""),
    ("quantity('1Gi').add(quantity('1Gi')).compareTo(quantity('2Gi')) == 0", True, ""),
    ("quantity('2Gi').sub(1).isLessThan(quantity('2Gi'))", True, ""),
    ("quantity('1500m').asApproximateFloat() == 1.5", True, ""),
    ("quantity('1k').asInteger() == 1000 && quantity('1k').isInteger()", True, ""),
    ("quantity('-1').sign() == -1", True, ""),
    ("isQuantity('1Gi') && !isQuantity('one')", True, ""),
    ("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))", True, ""),
    ("device.attributes['gpu.nvidia.com'].driverVersion.major() == 580", True, ""),
    ("device.attributes['gpu.nvidia.com'].driverVersion.minor() == 105", True, ""),
    ("device.attributes['gpu.nvidia.com'].driverVersion.patch() == 8", True, ""),
    ("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.105.8')) == 0", True, ""),
    ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True, ""),
    ("semver('v1.2', true).minor() == 2 && isSemver('1.2.3') && !isSemver('1.2')", True, ""),
    ("device.attributes['gpu.nvidia.com'].?profile.orValue('none') == 'none'", True, ""),
    ("has(device.attributes['gpu.nvidia.com'].profile)", False, ""),
    ("has(device.attributes['amd.com'].family)", False, ""),
    ("device.driver == 'x' && device.attributes['gpu.nvidia.com'].profile == 'a'", False, ""),
    ("device.attributes['gpu.nvidia.com'].profile == '1g.5gb'", False, "no such key: profile"),
    ("device.attributes['gpu.nvidia.com'].driverVersion == '580.105.8'", False, ""),
    ("quantity('ten') == quantity('10')", False, "invalid quantity"),
    ("quantity('1e999999') == quantity('1')", False, "invalid quantity"),
    ("semver('1.2') == semver('1.2.0')", False, "invalid semver"),
    ("device.attributes['gpu.nvidia.com'].productName", False, "must evaluate to bool"),
    ("cel.bind(a, device.attributes['gpu.nvidia.com'], a.type == 'gpu' && a.index == 3)", True, ""),
    # the apiserver's base libraries (issue 17 #11)
    ("device.attributes['gpu.nvidia.com'].productName.find('H[0-9]+') == 'H100'", True, ""),
    ("'a1b22c333'.findAll('[0-9]+') == ['1', '22', '333'] && 'a1b2'.findAll('[0-9]', 1) == ['1']", True, ""),
    ("[1, 2, 3].isSorted() && !['b', 'a'].isSorted() && [1, 2].sum() == 3 && [1.5].sum() == 1.5", True, ""),
    ("[3, 1, 2].min() == 1 && ['a', 'c'].max() == 'c'", True, ""),
    ("[].min() == 0", False, "min called on empty list"),
    ("sets.contains(['gpu', 'mig'], [device.attributes['gpu.nvidia.com'].type])", True, ""),
    ("sets.intersects([1], [2]) || sets.equivalent([1, 2], [2, 1])", True, ""),
    ("[3, 1, 2].sort() == [1, 2, 3] && [1, 1].distinct() == [1] && [[1], [2]].flatten() == [1, 2]", True, ""),
    ("device.attributes['gpu.nvidia.com'].exists(k, v, k == 'index' && v == 3)", True, ""),
    ("device.attributes['gpu.nvidia.com'].all(k, v, k != 'nosuch')", True, ""),
    ("isURL('https://a.example.com:8443/p?q=1') && !isURL('not a url')", True, ""),
    ("url('https://a.example.com:8443/p?q=1').getHostname() == 'a.example.com'", True, ""),
    ("url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]:80/').getPort() == '80'", True, ""),
    ("url('https://a.example.com/p?q=1&q=2').getQuery()['q'] == ['1', '2']", True, ""),
    ("url('https://a.example.com/x%20y').getEscapedPath() == '/x%20y'", True, ""),
    ("ip('10.0.0.1').family() == 4 && ip('::1').isLoopback() && isIP('fe80::1')", True, ""),
    ("ip('10.0.0.1').isGlobalUnicast() && !ip('224.0.0.1').isGlobalUnicast()", True, ""),
    ("ip('::ffff:1.2.3.4') == ip('1.2.3.4')", False, "IPv4-mapped"),
    ("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')", True, ""),
    ("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && cidr('10.0.0.0/8').containsIP('10.1.2.3')", True, ""),
    ("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.0.0.0/16').containsCIDR(cidr('10.0.0.0/8'))", True, ""),
    ("cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && cidr('10.1.2.3/8').prefixLength() == 8", True, ""),
    ("cidr('10.1.2.3/8').ip() == ip('10.1.2.3') && isCIDR('::1/128') && !isCIDR('10.0.0.1')", True, ""),
    ("'%s has %d GPUs'.format(['node', 8]) == 'node has 8 GPUs'", True, ""),
]


@pytest.mark.parametrize(("expression", "matches", "error"), TABLE, ids=[t[0][:60] for t in TABLE])
def test_selector(expression: str, matches: bool, error: str) -> None:
    program = cel.compile_selector(expression)
    assert program.error == ""
    outcome = cel.evaluate(program, DEVICE)
    assert (outcome.matches, error in outcome.error) == (matches, True), outcome
    assert bool(outcome.error) == bool(error), outcome


@pytest.mark.parametrize("expression", [
    "device.driver ==",
    "device.driver = 'x'",
    "nosuch(device.driver)",
    "device.driver.lowerAscii(1, 2, 3) == 'x'",
    "quantity(1) == quantity(2)",
    "1 + 'a' == 2",
    "'x' * 3",
    "device.drivr == 'gpu.nvidia.com'",
    "device.index == 0",
])
def test_compile_error_carries_the_compilers_message(expression: str) -> None:
    program = cel.compile_selector(expression)
    assert program.compiled is None
    assert program.error.startswith(("compilation failed: ERROR: <input>:1:", "must evaluate"))


@pytest.mark.parametrize("expression", ["1 < 2.5", "device.driver.size() >= 1.0"])
def test_cross_type_ordering_is_left_unjudged_not_refused(expression: str) -> None:
    # valid in Kubernetes (cross-type numeric comparisons), refused by cel-cpp's checker
    program = cel.compile_selector(expression)
    assert program.unsupported and "not checked" in program.error


def test_over_the_cost_limit_is_refused_before_it_runs() -> None:
    # seven nested loops over ten elements: 10^7 steps; the apiserver estimates it over its
    # limit and refuses the object, so it must not run here either.
    loops = "".join(f"[1,2,3,4,5,6,7,8,9,10].all(x{i}, " for i in range(7))
    program = cel.compile_selector(loops + "x0 < 100" + ")" * 7)
    assert program.compiled is None and program.cost > 1_000_000
    assert program.error == "Forbidden: too complex, exceeds cost limit"
    assert cel.compile_selector("[1,2,3].all(x, x > 0)").cost < 1000


def test_nesting_past_the_engine_is_unsupported_not_invalid() -> None:
    program = cel.compile_selector(" + ".join(["1"] * 40) + " > 0")
    assert program.unsupported and program.compiled is None
    assert "not checked" in program.error


def test_too_long_is_not_compiled() -> None:
    program = cel.compile_selector("true && " * 2000 + "true")
    assert program.error.startswith("Too long")


# Expressions beside TABLE's that name an extension's word, use `?`, or fail without one.
WITHOUT_EXTENSIONS = [
    "device.driver.reverse() == 'moc.aidivn.upg'",  # strings' reverse, not lists'
    "device.driver.reverse()",  # lists' alone: list, not bool; with strings': dyn, admitted
    "[1, 2].reverse() == [2, 1]",
    "device.driver == 'a' ? true : false",
    "'what?' == device.driver",
    "cel.bind(d, device.driver, d == 'gpu.nvidia.com')",
    "optional.of(1).hasValue()",
    "device.attributes['gpu.nvidia.com'][?'profile'].orValue('') == ''",
    "device.driver.format([]) == device.driver",
    "device.driver.indexOf('.') > 0 && device.driver.charAt(0) == 'g'",
    "device.driver.trim().substring(1) == 'pu.nvidia.com'",
    "'a,b'.split(',').join('-') == 'a-b'",
    "strings.quote(device.driver) != ''",
    "device.driver.replace('.', '/') == device.driver",
    "device.driver.sets() == 1",
]


@pytest.mark.parametrize("expression", [t[0] for t in TABLE] + WITHOUT_EXTENSIONS)
def test_judged_as_with_every_extension_loaded(monkeypatch: pytest.MonkeyPatch,
                                               expression: str) -> None:
    """cel-cpp's extension libraries load only for an expression that names one of their
    words: every verdict must be the one the full environment gives."""
    def judged() -> tuple[object, ...]:
        cel.compile_selector.cache_clear()
        program = cel.compile_selector(expression)
        returned = program.compiled.return_type().name() if program.compiled else None
        return program.error, program.unsupported, program.cost, returned

    lazy = judged()
    monkeypatch.setattr(cel, "_EXTENSION_WORDS", re.compile(""))  # every expression
    assert lazy == judged()


def test_compiled_once_per_distinct_expression() -> None:
    cel.compile_selector.cache_clear()
    for _ in range(3):
        cel.compile_selector("device.driver == 'gpu.nvidia.com'")
    info = cel.compile_selector.cache_info()
    assert (info.misses, info.hits) == (1, 2)


def test_evaluated_once_per_distinct_device() -> None:
    # 200 nodes x 8 GPUs of 4 models, 2 PCIe roots each: 8 distinct devices.
    inventory = DraInventory.build(slices(200), [GPU_CLASS])
    assert len(inventory.groups) == 4
    cel._CACHE.clear()
    calls = []
    real = cel._run
    try:
        cel._run = lambda program, device: calls.append(1) or real(program, device)  # type: ignore[assignment]
        check([parse_claim(CLAIM)], inventory)
        check([parse_claim(CLAIM)], inventory)
    finally:
        cel._run = real  # type: ignore[assignment]
    assert len(calls) == 2 * 8  # class selector and request selector, 8 devices, once


def test_hostile_search_is_bounded_and_never_refuses() -> None:
    # Eight single-GPU requests and a ninth with alternatives on 8-GPU nodes: 8! orderings
    # before the search could conclude; the budget stops it and the answer is "undecided",
    # counted as a fit (no false refusal), over every group together.
    inventory = DraInventory.build(slices(50), [GPU_CLASS])
    one = {"deviceClassName": "gpu.nvidia.com", "count": 1}
    requests = [{"name": f"r{i}", "exactly": one} for i in range(8)]
    requests.append({"name": "last", "firstAvailable": [{"name": "a", **one},
                                                        {"name": "b", **one}]})
    claim = parse_claim({"kind": "ResourceClaim", "metadata": {"name": "c"},
                         "spec": {"devices": {"requests": requests}}})
    verdicts = check([claim], inventory)
    assert all(v.fits for v in verdicts)
    assert all(v.undecided for v in verdicts)


def test_pigeonhole_refuses_without_searching() -> None:
    inventory = DraInventory.build(slices(4), [GPU_CLASS])
    requests = [{"name": f"r{i}", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                for i in range(9)]
    claim = parse_claim({"kind": "ResourceClaim", "metadata": {"name": "c"},
                         "spec": {"devices": {"requests": requests}}})
    verdicts = check([claim], inventory)
    assert [v.reasons for v in verdicts] == [
        ("the requests together need 9 devices and only 8 match any of them",)] * 4
