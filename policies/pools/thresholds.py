"""The minimums and thresholds of the node facts and the pool advice, with their defaults.

Users override any of them with a `GPUPoolThresholds` document (`gpupolicy audit --pools
--thresholds FILE`); unknown keys are refused with their path, as in a GPUPolicy. Every
default traces to `reference/operator-guide.md`:

- driver 418.87.01, Docker 19.03.5, containerd 1.4.3: "Prerequisites per node" (§2);
- 20 pods per shared GPU under cGPU: "at most 20 pods per GPU, more do not start" (§2);
- utilisation is judged on p50 and p95 over days, not a mean over minutes (§1, indicator 1),
  so utilisation advice needs `minUtilizationHours` of samples (72: three days);
- the rest are starting points the operator tunes to the pool's target.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError
from pydantic.alias_generators import to_camel

from policies import yamlpos

API_VERSION = "gpupolicy.io/v1alpha1"
KIND = "GPUPoolThresholds"

Ratio = Annotated[float, Field(ge=0.0, le=1.0, strict=False)]
Count = Annotated[StrictInt, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)


class Minimums(_Strict):
    driver: str = "418.87.01"
    containerd: str = "1.4.3"
    docker: str = "19.03.5"


class Advice(_Strict):
    # share: even the busy hours (p95) stay below this over the window
    share_below_p95: Ratio = 0.30
    # dedicate: half of the time (p50) the pool's GPUs are busier than this
    dedicate_above_p50: Ratio = 0.70
    # an allocated GPU whose p95 stays below this did no work over the window
    idle_below: Ratio = 0.05
    # fewer hours of samples than this: utilisation advice is withheld ("over days")
    min_utilization_hours: Annotated[float, Field(gt=0, strict=False)] = 72.0
    # grow: this many GPU pods wait for the pool, the median one at least this long
    grow_min_pending: Annotated[StrictInt, Field(ge=1)] = 1
    grow_wait_seconds: Annotated[float, Field(ge=0, strict=False)] = 600.0
    # isolate: at least this many failing GPU pods, and this share of them from neighbours
    isolate_min_failures: Annotated[StrictInt, Field(ge=1)] = 3
    isolate_neighbour_share: Ratio = 0.5
    # automate: more than this many distinct driver (or OS, runtime) versions in one pool
    max_versions: Annotated[StrictInt, Field(ge=1)] = 1
    # pods of these PriorityClasses are latency-critical: their pools are dedicated
    latency_critical_priority_classes: tuple[str, ...] = ()
    # nodes with this label set to "true" are latency-critical pools
    latency_critical_label: str = "gpupolicy.io/latency-critical"


class Thresholds(_Strict):
    minimums: Minimums = Minimums()
    cgpu_max_pods_per_gpu: Annotated[StrictInt, Field(ge=1, alias="cgpuMaxPodsPerGPU")] = 20
    advice: Advice = Advice()


DEFAULT = Thresholds()


class ThresholdsError(ValueError):
    """A thresholds file that cannot be used: every problem, each with its path."""


def parse_thresholds(text: str | bytes, source: str = "<thresholds>") -> Thresholds:
    stream = yamlpos.read_stream(text)
    if stream.problems:
        p = stream.problems[0]
        raise ThresholdsError(f"{source}:{p.line}:{p.column}: {p.message}")
    docs = [d for d in stream.documents if d.data is not None]
    if len(docs) != 1:
        raise ThresholdsError(f"{source}: expected one {KIND} document, found {len(docs)}")
    data: Any = docs[0].data
    if not isinstance(data, dict) or data.get("kind") != KIND \
            or data.get("apiVersion") != API_VERSION:
        raise ThresholdsError(f"{source}: expected apiVersion {API_VERSION}, kind {KIND}")
    extra = sorted(str(k) for k in data if k not in ("apiVersion", "kind", "metadata", "spec"))
    if extra:
        raise ThresholdsError(f"{source}: unknown field(s) {', '.join(extra)}")
    try:
        return Thresholds.model_validate(data.get("spec") or {})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            path = "spec." + ".".join(str(p) for p in err["loc"])
            line, column = docs[0].position(("spec", *err["loc"]), value=True)
            lines.append(f"{source}:{line}:{column}: {path}: {err['msg']}")
        raise ThresholdsError("\n".join(lines)) from None
