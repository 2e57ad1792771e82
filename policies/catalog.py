"""The GPU catalog: models, their product-label spellings and MIG geometry.

The facts live in `policies/data/catalog.yaml`; the edges read that file and hand the parsed
data to `Catalog.from_data`. Lookups compare normalised product names (see `Catalog.normalize`)
because GPU feature discovery rewrites the label (`-SHARED`, `-MIG-<profile>`) and old drivers
omit the `NVIDIA-` prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple


class MigProfile(NamedTuple):
    name: str  # as NVIDIA writes it: `1g.10gb`, `1g.10gb+me`
    compute: int  # compute slices (the `g`)
    memory_gb: int
    max_instances: int  # per GPU
    size: int  # memory slots one instance takes
    starts: tuple[int, ...]  # allowed first slots
    media: bool  # `+me`: at most one per GPU

    @property
    def resource_suffix(self) -> str:
        """The device plugin's spelling: `+` becomes `.` (`nvidia.com/mig-1g.10gb.me`)."""
        return self.name.replace("+", ".")


class GPUModel(NamedTuple):
    name: str  # canonical nvidia.com/gpu.product value
    products: tuple[str, ...]
    memory_mib: int
    family: str
    mig_slots: int = 0
    mig_compute: int = 0
    profiles: tuple[MigProfile, ...] = ()

    @property
    def mig_capable(self) -> bool:
        return bool(self.profiles)

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def profile(self, name: str) -> MigProfile | None:
        """The profile `name`; accepts `1g.10gb+me` and the resource spelling `1g.10gb.me`."""
        wanted = name.strip().lower()
        for p in self.profiles:
            if p.name == wanted or p.resource_suffix == wanted:
                return p
        return None


class InstanceType(NamedTuple):
    """A cloud machine type with GPUs: what a node template made of it holds."""

    name: str  # node.kubernetes.io/instance-type
    cloud: str  # aws | gcp | azure
    family: str  # karpenter.k8s.aws/instance-family on AWS
    model: GPUModel
    gpus: int
    vcpus: int
    memory_gib: int
    gpu_name: str = ""  # karpenter.k8s.aws/instance-gpu-name (AWS)


# GPUs of the largest common board (HGX/DGX): what one node holds when nothing says more.
GPUS_PER_NODE = 8


def _strip_suffixes(name: str) -> str:
    # GFD appends `-SHARED` after any `-MIG-<profile>`, so drop it first.
    if name.endswith("-shared"):
        name = name[: -len("-shared")]
    cut = name.find("-mig-")
    if cut >= 0:
        name = name[:cut]
    elif name.endswith("-mig"):
        name = name[: -len("-mig")]
    return name


@lru_cache(maxsize=4096)
def _normalize(name: str) -> str:
    # A DRA driver's productName has spaces ("NVIDIA H100 80GB HBM3") where GFD's label has
    # dashes (NVIDIA-H100-80GB-HBM3): the same model.
    name = _strip_suffixes(name.strip().lower().replace(" ", "-"))
    if name.startswith("nvidia-"):
        name = name[len("nvidia-"):]
    return name


def models_equal(a: str, b: str) -> bool:
    """Same GPU model up to `-SHARED` / `-MIG-…` suffixes, the `NVIDIA-` prefix and case."""
    return _normalize(a) == _normalize(b)


class Catalog:
    """Known GPU models, looked up by any product-label spelling in O(1)."""

    __slots__ = ("_by_name", "instances", "models")

    def __init__(self, models: Iterable[GPUModel],
                 instances: Iterable[InstanceType] = ()) -> None:
        self.models: tuple[GPUModel, ...] = tuple(models)
        # instance type name -> its GPUs, for node templates (policies/scheduling/templates.py)
        self.instances: Mapping[str, InstanceType] = {i.name: i for i in instances}
        self._by_name: dict[str, GPUModel] = {}
        for model in self.models:
            for spelling in (model.name, *model.products):
                key = _normalize(spelling)
                other = self._by_name.get(key)
                if other is not None and other is not model:
                    raise ValueError(
                        f"catalog: product {spelling!r} of model {model.name} is also "
                        f"listed by model {other.name}"
                    )
                self._by_name[key] = model

    normalize = staticmethod(_normalize)

    def lookup(self, product: str) -> GPUModel | None:
        return self._by_name.get(_normalize(product))

    @classmethod
    def empty(cls) -> Catalog:
        return cls(())

    @classmethod
    def from_data(cls, data: Any) -> Catalog:
        """Build from the parsed catalog YAML; ValueError names the model and field at fault."""
        if not isinstance(data, Mapping) or not isinstance(data.get("models"), list):
            raise ValueError("catalog: expected a mapping with a `models` list")
        models = [_model(i, raw) for i, raw in enumerate(data["models"])]
        by_name = {m.name: m for m in models}
        listed = data.get("instances", [])
        if not isinstance(listed, list):
            raise ValueError("catalog: `instances` must be a list")
        return cls(models, [t for i, raw in enumerate(listed) for t in _family(i, raw, by_name)])

    def instance(self, name: str) -> InstanceType | None:
        return self.instances.get(name)


def _field(raw: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = raw.get(key)
    # bool is an int subclass; a `true` where a number belongs is a typo, not a 1.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: field `{key}` must be {kind.__name__}, got {value!r}")
    return value


def _model(index: int, raw: Any) -> GPUModel:
    where = f"catalog: models[{index}]"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping")
    name = _field(raw, "name", str, where)
    where = f"catalog: model {name}"
    products = _field(raw, "products", list, where)
    if not products or not all(isinstance(p, str) and p for p in products):
        raise ValueError(f"{where}: field `products` must be a non-empty list of strings")
    memory = _field(raw, "memoryMiB", int, where)
    family = _field(raw, "family", str, where)
    mig_capable = _field(raw, "migCapable", bool, where)
    mig = raw.get("mig")
    if not mig_capable:
        if mig is not None:
            raise ValueError(f"{where}: field `mig` given but migCapable is false")
        return GPUModel(name, tuple(products), memory, family)
    if not isinstance(mig, Mapping):
        raise ValueError(f"{where}: field `mig` (slots, compute, profiles) needed if migCapable")
    slots = _field(mig, "slots", int, f"{where} mig")
    compute = _field(mig, "compute", int, f"{where} mig")
    raw_profiles = _field(mig, "profiles", list, f"{where} mig")
    if slots < 1 or compute < 1 or not raw_profiles:
        raise ValueError(f"{where}: field `mig` needs slots ≥ 1, compute ≥ 1 and profiles")
    profiles = tuple(_profile(p, slots, compute, where) for p in raw_profiles)
    if len({p.name for p in profiles}) != len(profiles):
        raise ValueError(f"{where}: field `mig.profiles` lists a profile twice")
    return GPUModel(name, tuple(products), memory, family, slots, compute, profiles)


def _family(index: int, raw: Any, models: Mapping[str, GPUModel]) -> list[InstanceType]:
    where = f"catalog: instances[{index}]"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping")
    family = _field(raw, "family", str, where)
    where = f"catalog: instance family {family}"
    cloud = _field(raw, "cloud", str, where)
    model = models.get(_field(raw, "model", str, where))
    if model is None:
        raise ValueError(f"{where}: field `model` names no model of the catalog")
    gpu_name = raw.get("gpuName", "")
    found = []
    for size in _field(raw, "sizes", list, where):
        if not (isinstance(size, list) and len(size) == 4 and isinstance(size[0], str)
                and all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                        for n in size[1:])):
            raise ValueError(f"{where}: every size is [instance type, GPUs, vCPUs, GiB]")
        found.append(InstanceType(size[0], cloud, family, model, size[1], size[2], size[3],
                                  str(gpu_name)))
    return found


def _profile(raw: Any, slots: int, compute: int, model_where: str) -> MigProfile:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{model_where}: every MIG profile must be a mapping")
    name = _field(raw, "name", str, f"{model_where} mig.profiles")
    where = f"{model_where} profile {name}"
    g = _field(raw, "compute", int, where)
    memory = _field(raw, "memoryGB", int, where)
    most = _field(raw, "maxInstances", int, where)
    size = _field(raw, "size", int, where)
    starts = _field(raw, "starts", list, where)
    if not 1 <= g <= compute:
        raise ValueError(f"{where}: field `compute` must be 1..{compute}, got {g}")
    if most < 1 or size < 1 or not starts:
        raise ValueError(f"{where}: fields `maxInstances`, `size`, `starts` must be positive")
    for start in starts:
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= slots - size:
            raise ValueError(f"{where}: field `starts` has {start!r}; must fit in {slots} slots")
    expected_prefix = f"{g}g."
    if not name.startswith(expected_prefix):
        raise ValueError(f"{where}: field `name` must start with {expected_prefix!r}")
    return MigProfile(name.lower(), g, memory, most, size, tuple(starts), name.endswith("+me"))
