"""gpuwise.vision's layer lists against published parameter counts and MACs, at any image size."""

import pytest

from gpuwise.catalog import get_model
from gpuwise.errors import GpuwiseError
from gpuwise.vision.architectures import described, network, vae_network, vision_arch

# id: (parameters of the reference implementation, published GMACs at the native size or None)
# torchvision model cards (their "GFLOPS" count multiply-accumulates); openai/CLIP; DiT Table 4;
# diffusers configs instantiated (SD 1.5 859,520,964; SDXL 2,567,463,684); Flux 11.9 B.
PUBLISHED = {
    "resnet-50": (25_557_032, 4.09),
    "resnet-101": (44_549_160, 7.80),
    "efficientnet-b0": (5_288_548, 0.39),
    "efficientnet-b1": (7_794_184, 0.69),
    "efficientnet-b2": (9_109_994, 1.09),
    "efficientnet-b3": (12_233_232, 1.83),
    "efficientnet-b4": (19_341_616, 4.39),
    "efficientnet-b5": (30_389_784, 10.27),
    "efficientnet-b6": (43_040_704, 19.07),
    "efficientnet-b7": (66_347_960, 37.75),
    "convnext-t": (28_589_128, 4.46),
    "convnext-b": (88_591_464, 15.36),
    "vit-b-16": (86_567_656, 17.56),
    "vit-l-16": (304_326_632, 61.55),
    "vit-h-14": (632_045_800, 167.29),
    "clip-vit-l-14": (303_966_208, None),
    "dit-xl-2": (675_000_000, 118.6),
    "sd-1.5": (859_520_964, None),
    "sdxl": (2_567_463_684, None),
    "flux-1-dev": (11_901_408_320, None),
}


def test_every_described_model_has_a_published_check_and_a_catalog_row():
    assert set(described()) == set(PUBLISHED)
    for model_id in described():
        assert get_model(model_id).id == model_id
        assert vision_arch(model_id).source


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_parameters_and_macs_match_the_published_figures(model_id):
    arch = vision_arch(model_id)
    params, gmacs = PUBLISHED[model_id]
    net = network(arch, arch.image_size, arch.image_size)
    assert net.params == pytest.approx(params, rel=0.001)
    if gmacs is not None:
        # torchvision rounds to 2 decimals; efficientnet-b2 is listed at 288 px test size (1.09) vs 260 here
        size = 288 if model_id == "efficientnet-b2" else arch.image_size
        assert network(arch, size, size).macs / 1e9 == pytest.approx(gmacs, rel=0.01, abs=0.006)


def test_known_figures_of_the_issue():
    r50 = network(vision_arch("resnet-50"), 224, 224)
    assert round(r50.params / 1e6, 1) == 25.6 and round(r50.macs / 1e9, 1) == 4.1
    vit = network(vision_arch("vit-b-16"), 224, 224)
    assert round(vit.params / 1e6) == 87 and round(vit.macs / 1e9, 1) == 17.6  # "86 M" is the encoder alone
    encoder = vit.params - (768 * 1000 + 1000)
    assert round(encoder / 1e6) == 86
    assert round(network(vision_arch("sd-1.5"), 512, 512).params / 1e6) == 860
    assert round(network(vision_arch("sdxl"), 1024, 1024).params / 1e9, 1) == 2.6


def test_sd15_unet_macs_without_attention_scores_match_bk_sdm():
    # BK-SDM (Kim et al. 2023, arXiv:2305.15798) Table: SD-v1.4 U-Net 339 G MACs at 512² — module
    # counters skip the two attention matmuls, which are ~62 G at the 64² latent.
    net = network(vision_arch("sd-1.5"), 512, 512)
    without_scores = sum(layer.macs for layer in net.layers if layer.kind != "attention")
    assert without_scores / 1e9 == pytest.approx(339, rel=0.01)


def test_any_image_size_scales_the_work_not_the_weights():
    arch = vision_arch("resnet-50")
    small, big = network(arch, 224, 224), network(arch, 448, 448)
    assert big.params == small.params
    assert big.macs / small.macs == pytest.approx(4.0, rel=0.02)  # convolutions scale with the pixels
    detector = network(arch, 800, 1333)  # a Mask R-CNN-sized input, non-square
    assert detector.macs / small.macs == pytest.approx(800 * 1333 / 224**2, rel=0.03)


def test_transformers_count_patch_tokens_and_attention_grows_quadratically():
    vit = vision_arch("vit-b-16")
    at224, at384 = network(vit, 224, 224), network(vit, 384, 384)
    assert at384.params - at224.params == (577 - 197) * 768  # position table: 577 vs 197 tokens
    linear = 12 * 12 * 768 * 768  # per token: qkv + proj + MLP (4 + 8 d²) over 12 blocks
    assert at384.macs / at224.macs > 577 / 197  # attention adds more than the token ratio
    patches, head = 196 * 768 * 16 * 16 * 3, 768 * 1000
    assert at224.macs == pytest.approx(197 * linear + 2 * 197 * 197 * 768 * 12 + patches + head, rel=1e-6)
    dit = vision_arch("dit-xl-2")
    tokens = {layer.name: layer for layer in network(dit, 512, 512).layers}["blocks.0.attn"]
    assert tokens.macs == 2.0 * 1024 * 1024 * 1152  # 512 px → 64² latent → 32² patches of 2


def test_sdxl_at_1024_latent_and_vae():
    net = network(vision_arch("sdxl"), 1024, 1024)
    assert (net.height, net.width) == (1024, 1024)
    first = net.layers[0]
    assert first.name == "conv_in" and first.output == 320 * 128 * 128  # latent = image / 8
    vae = vae_network(vision_arch("sdxl"), 1024, 768)
    assert vae.layers[-1].output == 3 * 1024 * 768  # back to pixels, non-square
    assert vae.params == pytest.approx(
        49_490_199, rel=1e-6
    )  # diffusers AutoencoderKL decoder + post_quant_conv


def test_too_small_images_are_one_clear_line():
    with pytest.raises(GpuwiseError, match="at least 32 px"):
        network(vision_arch("resnet-50"), 16, 16)
