"""The analytic vision model against the traced simulator (real PyTorch on fake tensors) on ResNets
written here in the torchvision layout (torchvision itself is not a dependency)."""

import textwrap

import pytest

pytest.importorskip("torch")

from gpuwise.memory.regime import regime_for
from gpuwise.memory.vision import layer_activation_bytes
from gpuwise.simulation import traced_estimate
from gpuwise.vision.architectures import Network, VisionArch
from gpuwise.vision.cnn import ResNetSpec, resnet
from gpuwise.vision.transformer import VitSpec, vit
from gpuwise.workload import workload_from_mapping

pytestmark = pytest.mark.slow  # fake-tensor simulations: ~3-6 s each on a quiet machine, more under load

RESNETS = textwrap.dedent("""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, inplanes, width, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(width * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or inplanes != width * 4:
                self.downsample = nn.Sequential(
                    nn.Conv2d(inplanes, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4)
                )

        def forward(self, x):
            shortcut = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            return self.relu(self.bn3(self.conv3(out)) + shortcut)

    class ResNet(nn.Module):
        def __init__(self, depths, widths, classes):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            blocks, inplanes = [], 64
            for stage, (depth, width) in enumerate(zip(depths, widths)):
                for i in range(depth):
                    blocks.append(Bottleneck(inplanes, width, 2 if i == 0 and stage > 0 else 1))
                    inplanes = width * 4
            self.layers = nn.Sequential(*blocks)
            self.fc = nn.Linear(inplanes, classes)

        def forward(self, x):
            x = self.layers(self.maxpool(self.relu(self.bn1(self.conv1(x)))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    def small():
        return ResNet((2, 2, 2, 2), (16, 32, 64, 128), 10)

    def resnet50():
        return ResNet((3, 4, 6, 3), (64, 128, 256, 512), 1000)

    def images(batch_size, image_size, dtype):
        return torch.randn(batch_size, 3, image_size, image_size, dtype=dtype)
""")

VIT = textwrap.dedent("""
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, heads, mlp):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class ViT(nn.Module):
        def __init__(self, d=192, depth=4, heads=3, mlp=768, patch=16, image=224, classes=10):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))
            self.blocks = nn.Sequential(*[Block(d, heads, mlp) for _ in range(depth)])
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])

    def tiny():
        return ViT()

    def images(batch_size, image_size, dtype):
        return torch.randn(batch_size, 3, image_size, image_size, dtype=dtype)
""")

SPECS = {
    "small": ResNetSpec((2, 2, 2, 2), (16, 32, 64, 128), 10),
    "resnet50": ResNetSpec((3, 4, 6, 3), (64, 128, 256, 512)),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("vision") / "resnets.py"
    path.write_text(RESNETS)
    return str(path)


@pytest.fixture(scope="module")
def vits(tmp_path_factory):
    path = tmp_path_factory.mktemp("vision") / "vits.py"
    path.write_text(VIT)
    return str(path)


def analytic(name: str, precision: str, batch: int, size: int) -> tuple[Network, float, float]:
    w = workload_from_mapping({"model_factory": "x:y", "task": "cv-train", "precision": precision})
    regime = regime_for(w)
    b = resnet(SPECS[name], size, size)
    arch = VisionArch(name, "resnet", size, SPECS[name], "this test")
    net = Network(arch, size, size, tuple(b.layers), dict(b.block_inputs), b.input_elements)
    acts = batch * sum(layer_activation_bytes(layer, regime, False) for layer in net.layers)
    # gpuwise counts the input batch the stem keeps (it is on the GPU); the simulator creates the batch
    # before it starts counting, so only autocast's 16-bit copy of it is comparable.
    acts += batch * net.input_elements * regime.compute_bytes if regime.is_amp else 0.0
    return net, acts, net.params * regime.autocast_copy_bytes


@pytest.mark.parametrize(
    "name, precision, batch, size",
    [("small", "fp32", 8, 64), ("small", "amp-bf16", 8, 64), ("resnet50", "fp32", 2, 224)],
)
def test_resnet_activations_agree_with_the_traced_simulation(models, name, precision, batch, size):
    w = workload_from_mapping(
        {
            "model_factory": f"{models}:{name}",
            "task": "cv-train",
            "precision": precision,
            "optimizer": "adamw",
            "batch_size": batch,
            "image_size": size,
        }
    )
    traced = traced_estimate(w, input_factory=f"{models}:images")
    net, acts, casts = analytic(name, precision, batch, size)
    assert traced.num_params == net.params
    forward = next(p for p in traced.phases if p.name == "forward").to_dict()["components_bytes"]
    # The simulator files autocast's 16-bit weight copies under activations (they are created in the
    # forward); the analytic model lists them apart.
    gap = (acts + casts) / forward["activations"] - 1
    assert abs(gap) < 0.10, f"analytic vs traced activations: {gap:+.1%}"


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_vit_blocks_agree_with_the_traced_simulation(vits, precision):
    # The pre-LN block formula (8d + 2f per token) that DiT, MMDiT and the UNet's attention reuse.
    w = workload_from_mapping(
        {
            "model_factory": f"{vits}:tiny",
            "task": "cv-train",
            "precision": precision,
            "optimizer": "adamw",
            "batch_size": 8,
            "image_size": 224,
        }
    )
    traced = traced_estimate(w, input_factory=f"{vits}:images")
    regime = regime_for(w)
    b = vit(VitSpec(192, 4, 3, 768, 16, classes=10), 224, 224)
    assert traced.num_params == sum(layer.params for layer in b.layers)
    acts = 8 * sum(layer_activation_bytes(layer, regime, False) for layer in b.layers)
    acts += 8 * b.input_elements * regime.compute_bytes if regime.is_amp else 0.0
    acts += sum(layer.params for layer in b.layers) * regime.autocast_copy_bytes
    forward = next(p for p in traced.phases if p.name == "forward").to_dict()["components_bytes"]
    gap = acts / forward["activations"] - 1
    assert abs(gap) < 0.10, f"analytic vs traced activations: {gap:+.1%}"
