"""A torchvision detector under ``thunder.jit``, against eager: its ``nms`` keeps another number of boxes on each
image (Note [Custom ops whose sizes come from the data] in thunder.torch.custom_ops), which ran every call eagerly
and traced it again."""

from __future__ import annotations

import pytest
import torch

import thunder

detection = pytest.importorskip("torchvision.models.detection")


def test_faster_rcnn_detects_as_eager_and_hits_the_cache_from_its_third_call():
    torch.manual_seed(0)
    model = detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5).eval()
    jitted = thunder.jit(model)
    for seed in range(4):
        torch.manual_seed(seed)
        images = [torch.rand(3, 160, 192), torch.rand(3, 128, 160)]
        with torch.no_grad():
            expected, got = model(images), jitted(images)
        for e, g in zip(expected, got):
            assert e.keys() == g.keys()
            torch.testing.assert_close(g, e)
    # the second call misses once: the model sets its RoI pooler's scales on its first call
    assert thunder.cache_misses(jitted) == 2
