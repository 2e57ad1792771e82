"""The pool view's JSON shape (the names issue 32 fixed), markdown, and the live audit's pool
view equal to the offline one on the same objects."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cluster.fakeapi import FakeAPIServer
from tests.pools.helpers import DUMP, NOW, cli


def test_the_json_shape() -> None:
    code, out, err = cli("audit", str(DUMP), "--pools", "-o", "json", "--now", NOW)
    assert code == 1, err
    doc = json.loads(out)
    train = next(p for p in doc["pools"] if p["name"] == "train")
    assert train["nodes"] == ["train-1", "train-2", "train-3", "train-4"]
    assert train["gpus"] == {"allocatable": 31, "allocated": 12, "free": 19, "fragmented": 3}
    assert train["pending"]["count"] == 1
    assert train["pending"]["waitSeconds"] == {"p50": 7200, "max": 7200}
    assert train["failures"] == {}
    assert train["versions"]["driver"] == {"535.104.05": ["train-1", "train-2", "train-4"],
                                           "470.82.01": ["train-3"]}
    assert set(train["versions"]) == {"driver", "cuda", "os", "runtime"}
    assert "utilization" not in train  # no --prometheus
    assert all(set(a) == {"action", "because"} for a in train["advice"])
    assert train["isolation"]["tainted"] is True


def test_markdown_is_a_table_per_pool_with_cluster_text_escaped(tmp_path: Path) -> None:
    objects = yaml.safe_load(DUMP.read_text(encoding="utf-8"))
    for obj in objects["items"]:
        if obj["metadata"]["name"] == "train-1":
            obj["status"]["nodeInfo"]["osImage"] = "Ubuntu | <b>22.04</b>"
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump(objects), encoding="utf-8")
    code, out, err = cli("audit", str(dump), "--pools", "-o", "markdown", "--now", NOW)
    assert code == 1, err
    assert out.startswith("# GPU pools\n")
    assert out.count("\n## ") == 6  # five pools and the cluster
    assert "| GPUs | 31 allocatable, 12 allocated, 19 free, 3 fragmented |" in out
    assert "Ubuntu \\| &lt;b>22.04&lt;/b>" in out
    assert "- **automate**: driver: 535.104.05 on 3 nodes" in out


def test_the_live_pool_view_is_the_offline_one(tmp_path: Path) -> None:
    objects = yaml.safe_load(DUMP.read_text(encoding="utf-8"))["items"]
    server = FakeAPIServer().start()
    try:
        server.add_all(objects)
        config = server.kubeconfig(str(tmp_path / "kubeconfig"))
        code, live, err = cli("audit", "--kubeconfig", config, "--pools", "-o", "json",
                              "--now", NOW, "--page-size", "7", "--progress", "never")
    finally:
        server.stop()
    assert code == 1, err
    _, offline, _ = cli("audit", str(DUMP), "--pools", "-o", "json", "--now", NOW)
    assert json.loads(live) == json.loads(offline)


def test_every_shard_sees_every_pool_whole(tmp_path: Path) -> None:
    _, whole, _ = cli("audit", str(DUMP), "--pools", "-o", "json", "--now", NOW)
    for shard in ("0/3", "1/3", "2/3"):
        code, out, err = cli("audit", str(DUMP), "--pools", "-o", "json", "--now", NOW,
                             "--shard", shard)
        assert code == 1, err
        assert json.loads(out)["pools"] == json.loads(whole)["pools"]
