"""One timm architecture per family (timm model module) that the test zoo lacks, random weights, thunder against
eager: the forward in ``eval()`` under ``no_grad``, a training step in ``train()`` (output, and every parameter's
gradient including which are None, from the mean square of the output) and two more training calls, the last of
which must hit the cache. The companion of ``sweep_hf_models.py`` for models nobody here wrote.

Run: ``python -m benchmarks.sweep_timm_models [--models a,b | --families eva,pit] [--timeout 300] [--sample 20] [--size 96]``. Each
family's smallest model (parameters counted on the meta device, at most 30M) runs in its own process under a time
limit. ``--size`` shrinks the input where the model takes any size (0: the model's own). A model eager itself
cannot run is skipped. Prints one JSON line per model, then the counts and every model that is not ok.

``--torchvision`` sweeps torchvision's models instead (``TORCHVISION``: the classification families the zoo lacks,
segmentation, video, optical flow and detection; detectors train on targets, their output is their losses), every
floating-point tensor of the output compared.
"""

from __future__ import annotations

import argparse
import json


def _zoo_modules(timm) -> set[str]:
    """The timm modules whose models tests/test_zoo_families.py runs."""
    import ast
    import pathlib

    source = (pathlib.Path(__file__).parents[1] / "tests" / "test_zoo_families.py").read_text()
    names = next(ast.literal_eval(n.value) for n in ast.parse(source).body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TIMM")  # fmt: skip
    return {timm.models._registry._model_to_module[n] for n in names}


def _smallest(timm, torch, module: str) -> str | None:
    """The model of ``module`` with the fewest parameters (counted on meta), at most 30M; None when none builds."""
    best = None
    for name in timm.list_models(module=module):
        try:
            with torch.device("meta"):
                n = sum(p.numel() for p in timm.create_model(name, pretrained=False, num_classes=10).parameters())
        except Exception:  # noqa: BLE001 - a model that cannot be built on meta is not a candidate
            continue
        if n <= 30e6 and (best is None or n < best[0]):
            best = (n, name)
    return best and best[1]


# torchvision models the zoo (tests/test_zoo_families.py) lacks, one per classification family, and every other
# kind: name -> the input's kind ("image" tries 64 pixels, then 224).
TORCHVISION = dict.fromkeys(["efficientnet_v2_s", "inception_v3", "mobilenet_v3_large", "regnet_x_400mf", "resnet34",
                             "shufflenet_v2_x1_0", "squeezenet1_1", "swin_v2_t", "vgg11_bn", "vit_b_32",
                             "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"], "image")
TORCHVISION.update(dict.fromkeys(["r3d_18", "mc3_18", "r2plus1d_18", "s3d", "swin3d_t", "mvit_v2_s"], "video"))
TORCHVISION.update(raft_small="flow", ssdlite320_mobilenet_v3_large="detection", fcos_resnet50_fpn="detection",
                   retinanet_resnet50_fpn="detection", keypointrcnn_resnet50_fpn="detection",
                   maskrcnn_resnet50_fpn="detection", fasterrcnn_resnet50_fpn="detection")  # fmt: skip


def _small_detector(name: str):
    """A ``*_resnet50_fpn`` detector of torchvision on a ResNet-18 FPN backbone that resizes images to 128-192 pixels
    (resnet50's is over the sweep's 30M parameters, and 800 pixels is minutes on a CPU): the same heads, anchors,
    losses and post-processing."""
    from torchvision.models.detection import FCOS, FasterRCNN, KeypointRCNN, MaskRCNN, RetinaNet
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    cls = dict(fasterrcnn=FasterRCNN, maskrcnn=MaskRCNN, keypointrcnn=KeypointRCNN, retinanet=RetinaNet, fcos=FCOS)[
        name.split("_")[0]]
    one_stage = cls in (RetinaNet, FCOS)
    backbone = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5,
                                   returned_layers=[2, 3, 4] if one_stage else None,
                                   extra_blocks=LastLevelP6P7(256, 256) if one_stage else None)  # fmt: skip
    # every box scored (random weights score none over the default thresholds: nothing would reach the NMS)
    kwargs = {"score_thresh": 0.0} if one_stage else {"box_score_thresh": 0.0}
    kwargs.update({"num_keypoints": 17} if cls is KeypointRCNN else {})
    return cls(backbone, num_classes=3, min_size=128, max_size=192, **kwargs)


def _timm_case(name: str, size: int):
    """A timm model and its input: (model, eval arguments, train arguments)."""
    import copy

    import timm
    import torch

    model = timm.create_model(name, pretrained=False, num_classes=10)
    shape = model.pretrained_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(1))
    if size and not model.pretrained_cfg.get("fixed_input_size", False):
        try:
            small = torch.randn(2, shape[0], size, size, generator=torch.Generator().manual_seed(1))
            copy.deepcopy(model).eval()(small)
            x = small
        except Exception:  # noqa: BLE001 - the model's own size then
            pass
    return model, (x,), (x,)


def _torchvision_case(name: str, size: int):
    """A torchvision model (``TORCHVISION``'s kind of input) and its input: (model, eval arguments, train arguments).
    Detectors get two images of other sizes and, to train, a box and label for each."""
    import copy

    import torch
    import torchvision

    g = torch.Generator().manual_seed(1)
    kind = TORCHVISION.get(name, "image")
    if kind == "detection":
        if "resnet50_fpn" in name:
            model = _small_detector(name)
        else:
            model = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=3)
        images = [torch.rand(3, 160, 192, generator=g), torch.rand(3, 128, 160, generator=g)]
        targets = [{"boxes": torch.tensor([[10.0, 20.0, 90.0, 100.0]]), "labels": torch.tensor([1])} for _ in images]
        if name.startswith("keypoint"):
            for t in targets:
                t["keypoints"] = torch.tensor([[[30.0, 40.0, 1.0]] * 17])
        if name.startswith("mask"):
            for t, im in zip(targets, images):
                t["masks"] = torch.zeros(1, *im.shape[1:], dtype=torch.uint8)
                t["masks"][:, 20:100, 10:90] = 1
        return model, (images,), (images, targets)
    if kind == "flow":
        model = torchvision.models.get_model(name, weights=None)
        a, b = torch.rand(1, 3, 128, 128, generator=g), torch.rand(1, 3, 128, 128, generator=g)
        return model, (a, b), (a, b)
    kwargs = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
    if name in torchvision.models.list_models(module=torchvision.models.segmentation):
        kwargs["weights_backbone"] = None  # its default downloads ImageNet weights
    model = torchvision.models.get_model(name, weights=None, num_classes=10, **kwargs)
    if kind == "video":
        x = torch.randn(2, 3, 16, 112, 112, generator=g) if name != "mvit_v2_s" else torch.randn(1, 3, 16, 224, 224, generator=g)
        return model, (x,), (x,)
    for side in (size or 224, 224, 299):
        x = torch.randn(2, 3, side, side, generator=g)
        try:
            copy.deepcopy(model).eval()(x)
            break
        except Exception:  # noqa: BLE001 - a larger size then
            pass
    return model, (x,), (x,)


def _floats(out) -> list:
    """Every floating-point tensor of an output (tensors, tuples, lists, dicts, nested)."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _loss(out):
    return sum(t.float().pow(2).mean() for t in _floats(out) if t.requires_grad)


def check(name: str, size: int, library: str = "timm", make=None) -> dict:
    """One model: eager first (a model eager cannot run is a skip), then thunder. ``make()`` builds (model, eval
    arguments, train arguments) where given (the other libraries' sweeps), else the timm or torchvision case."""
    import copy
    import warnings

    import torch

    import thunder
    from benchmarks.sweep_hf_models import error_text, gradient_differences

    warnings.simplefilter("error", thunder.EagerRunWarning)
    try:
        torch.manual_seed(0)
        model, x, x_train = make() if make else (_timm_case if library == "timm" else _torchvision_case)(name, size)
        # the small detectors' box and keypoint heads are large matrices, cheap to run
        if sum(p.numel() for p in model.parameters()) > (50e6 if TORCHVISION.get(name) == "detection" else 30e6):
            return {"status": "skip", "why": "over 30M parameters"}
        reference = copy.deepcopy(model)
        with torch.no_grad():
            expected = _floats(reference.eval()(*x))
        torch.manual_seed(2)
        _loss(copy.deepcopy(reference).train()(*x_train)).backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "why": f"eager: {type(e).__name__}: {str(e)[:100]}"}
    result: dict = {"input": [list(t.shape) for t in x if isinstance(t, torch.Tensor)] or "images"}
    try:
        jm = thunder.jit(model.eval())
        with torch.no_grad():
            got = _floats(jm(*x))
        if [t.shape for t in got] != [t.shape for t in expected]:
            raise AssertionError(f"output shapes {[t.shape for t in got]} vs eager's {[t.shape for t in expected]}")
        # (a detector's empty detections skipped) relative to the output's largest element where that is over 1 (random weights through batch norms in eval
        # with unit running statistics give inception_v3 logits of 1e9, equal to eager's to rounding)
        result["eval_maxdiff"] = max(((a - b).abs().max().item() / max(1.0, b.abs().max().item())
                                      for a, b in zip(got, expected) if b.numel()), default=0.0)  # fmt: skip
        model.train(), reference.train()
        torch.manual_seed(2)
        expected_out = _floats(reference(*x_train))
        _loss(expected_out).backward()
        torch.manual_seed(2)
        out = _floats(jm(*x_train))
        _loss(out).backward()
        result["train_maxdiff"] = max(((a - b).abs().max().item() for a, b in zip(out, expected_out) if b.numel()),
                                      default=0.0)  # fmt: skip
        worst, none_differs = gradient_differences(model, reference)
        result["grad_reldiff"], result["grad_none_differs"] = worst, none_differs
        misses = []
        for _ in range(2):
            before = thunder.cache_misses(jm)
            torch.manual_seed(2)
            _loss(jm(*x_train)).backward()
            misses.append(thunder.cache_misses(jm) - before)
        result["misses_second_third"] = misses
        wrong = result["eval_maxdiff"] > 1e-3 or result["train_maxdiff"] > 1e-3 or worst > 1e-2 or none_differs
        result["status"] = "WRONG" if wrong else ("recompiles" if misses[1] else "ok")
    except Exception as e:  # noqa: BLE001
        result.update(status="error", why=error_text(e))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated timm model names (default: one per family the zoo lacks)")
    ap.add_argument("--families", help="comma-separated timm modules (default: every one the zoo lacks)")
    ap.add_argument("--timeout", type=float, default=300.0, help="CPU seconds per model")
    ap.add_argument("--sample", type=int, default=0, help="at most this many families (evenly spaced)")
    ap.add_argument("--size", type=int, default=96, help="input height and width where the model takes any (0: its own)")
    ap.add_argument("--torchvision", action="store_true", help="torchvision's models (TORCHVISION) instead of timm's")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    library = "torchvision" if opts.torchvision else "timm"
    if opts.child:
        print(json.dumps({"model": opts.child, **check(opts.child, opts.size, library)}))
        return
    if opts.models:
        names = opts.models.split(",")
    elif opts.torchvision:
        names = list(TORCHVISION)
    else:
        import timm
        import torch

        modules = opts.families.split(",") if opts.families else sorted(set(timm.list_modules()) - _zoo_modules(timm))
        if opts.sample and opts.sample < len(modules):
            modules = [modules[i * len(modules) // opts.sample] for i in range(opts.sample)]
        names = [n for n in (_smallest(timm, torch, m) for m in modules) if n]
    from benchmarks.sweep_hf_models import child_row, print_summary

    rows = []
    for name in names:
        args = [name, "--size", str(opts.size), *(["--torchvision"] if opts.torchvision else [])]
        row = child_row("benchmarks.sweep_timm_models", args, name, opts.timeout)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print_summary(rows)

if __name__ == "__main__":
    main()
