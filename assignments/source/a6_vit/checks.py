"""a6_vit judged outside the student's process (``grader.verdicts``): for each test
cell but the trained model's, the calls the sandbox makes with the student's functions and
``ViT`` (given the weights of a reference ``course_utils.vit.ViT``, sent as data, with the
class token and the positions drawn large enough to matter) and the course_utils.vit
reference the grader compares them with. test_accuracy: the student's ViT with the
student's weights must give the reference ViT's logits on the validation and test digits
(in the sandbox); the grader then computes the accuracies itself with the reference class
holding those weights. Keep the cases in step with the test cells of a6_vit.ipynb (nbgrader
still runs those).

Every random input and weight here comes from a ``torch.Generator`` of its own, never from
torch's global generator: a folder is graded by several threads at once, and calls made
under ``torch.manual_seed`` in two of them at the same time would draw each other's numbers
(the inputs sent to one sandbox would then differ from those the reference answers were
computed on)."""

from grader.verdicts import Question, TrainedModelQuestion
from grader.verdicts import call as _call

CHECKPOINT = "vit.pt"
THRESHOLD = 0.93  # accuracy on the validation digits (visible) and on the test digits (hidden)


def reference():
    from course_utils import vit

    return {"patchify": vit.patchify, "unpatchify": vit.unpatchify, "attention_rollout": vit.attention_rollout,
            "ViT": vit.ViT, "ViTConfig": lambda **kwargs: vit.ViTConfig(**kwargs)}


def patchify_calls():
    import torch
    image = torch.arange(16.0).reshape(1, 1, 4, 4)
    digits = _digits()
    calls = [_call("patchify", image, 2), _call("patchify", torch.cat([image, 100 + image], dim=1), 2),
             _call("patchify", torch.arange(8.0).reshape(1, 1, 2, 4), 2)]
    calls += [_call("patchify", digits.train.images[:8], p) for p in (1, 2, 8)]
    g = torch.Generator().manual_seed(1)
    for shape, p in (((3, 3, 6, 9), 3), ((2, 2, 8, 4), 4), ((4, 1, 5, 5), 1), ((2, 3, 6, 6), 6)):
        calls.append(_call("patchify", torch.randn(shape, generator=g), p, hidden=True))
    return calls


def unpatchify_calls():
    import torch
    from course_utils.vit import patchify
    patches = torch.tensor([[[0.0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]])
    batch = _digits().train.images[:8]
    calls = [_call("unpatchify", patches, 2, 4, 4),
             _call("unpatchify", torch.cat([patches, 100 + patches], dim=2), 2, 4, 4),
             _call("unpatchify", torch.tensor([[[0.0, 1, 4, 5], [2, 3, 6, 7]]]), 2, 2, 4),
             _call("unpatchify", batch.reshape(8, 1, 64), 8, 8, 8), _call("unpatchify", batch.reshape(8, 64, 1), 1, 8, 8)]
    calls += [_call("unpatchify", patchify(batch, p), p, 8, 8, hidden=True) for p in (2, 4)]
    g = torch.Generator().manual_seed(2)
    for shape, p in (((3, 3, 6, 9), 3), ((2, 2, 8, 4), 4), ((1, 1, 10, 5), 5)):
        calls.append(_call("unpatchify", patchify(torch.randn(shape, generator=g), p), p, *shape[2:], hidden=True))
    return calls


SMALL = dict(image_size=4, patch_size=2, d_model=8, num_heads=2, num_layers=2, d_ff=16)
HIDDEN_EMBED = [(3, dict(image_size=6, patch_size=3, channels=3, d_model=12, num_heads=3, num_layers=1, d_ff=20)),
                (4, dict(image_size=8, patch_size=4, d_model=8, num_heads=2, num_layers=2, d_ff=16, positions="none"))]
HIDDEN_FORWARD = [(5, dict(image_size=6, patch_size=2, channels=2, d_model=12, num_heads=3, num_layers=3, d_ff=20,
                           num_classes=4)),
                  (6, dict(image_size=8, patch_size=4, d_model=8, num_heads=2, num_layers=2, d_ff=16,
                           positions="none"))]


def _model(config: dict, seed: int, large: bool = True) -> dict:
    """The spec of the student's ``ViT`` given the weights of a reference one, drawn from a
    generator seeded with ``seed``: linear weights ~ N(0, 1 / fan_in), biases ~ N(0, 0.01),
    LayerNorm gains ~ 1 + N(0, 0.01); the class token and the positions ~ N(0, 1) when
    ``large`` (an answer that forgets or misplaces them is far off), else N(0, 0.02**2) as at
    initialisation."""
    import torch
    from course_utils import vit
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in vit.ViT(vit.ViTConfig(**config)).state_dict().items():
        noise = torch.randn(value.shape, generator=g)
        if name in ("cls_token", "pos_embed"):
            state[name] = noise if large else 0.02 * noise
        elif value.dim() == 2:                         # a linear layer's weight (out, in)
            state[name] = noise / value.shape[1] ** 0.5
        elif "norm" in name and name.endswith(".weight"):
            state[name] = 1 + 0.1 * noise
        else:
            state[name] = 0.1 * noise
    return {"fn": "ViT", "init": [{"$make": {"fn": "ViTConfig", "args": [], "kwargs": config}}], "state": state}


def _images(seed: int, count: int, config: dict):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.rand(count, config.get("channels", 1), config["image_size"], config["image_size"], generator=g)


def embed_calls():
    images = _images(0, 3, SMALL)
    calls = [{**_model(SMALL, 0, large=False), "method": "embed", "args": [images], "hidden": False},
             {**_model(SMALL, 0), "method": "embed", "args": [images], "hidden": False},
             {**_model({**SMALL, "positions": "none"}, 1), "method": "embed", "args": [images], "hidden": False}]
    for seed, config in HIDDEN_EMBED:
        calls.append({**_model(config, seed), "method": "embed", "args": [_images(seed, 5, config)], "hidden": True})
    return calls


def forward_calls():
    import torch
    from course_utils.vit import patchify, unpatchify
    images = _images(0, 3, SMALL)
    shuffled = unpatchify(patchify(images, 2)[:, torch.tensor([3, 1, 0, 2])], 2, 4, 4)
    calls = [{**_model(SMALL, 0, large=False), "args": [images], "kwargs": {"return_attention": True}, "hidden": False},
             {**_model(SMALL, 0, large=False), "args": [images], "hidden": False},
             {**_model(SMALL, 0), "args": [shuffled], "kwargs": {"return_attention": True}, "hidden": False},
             {**_model({**SMALL, "positions": "none"}, 1), "args": [shuffled], "hidden": False}]
    for seed, config in HIDDEN_FORWARD:
        x = _images(seed, 4, config)
        calls += [{**_model(config, seed), "args": [x], "hidden": True},
                  {**_model(config, seed), "args": [x], "kwargs": {"return_attention": True}, "hidden": True}]
    return calls


def rollout_calls():
    import torch
    one = torch.tensor([[[[0.5, 0.5], [0.2, 0.8]]]])
    swap = torch.tensor([[[[0.0, 1.0], [1.0, 0.0]]]])
    heads = torch.cat([torch.eye(2)[None, None], swap], dim=1)
    g = torch.Generator().manual_seed(0)
    layers = [torch.softmax(2 * torch.randn(3, 2, 5, 5, generator=g), dim=-1) for _ in range(2)]
    calls = [_call("attention_rollout", w) for w in ([one], [one, swap], [swap, one], [heads], layers)]
    g = torch.Generator().manual_seed(7)
    for num_layers, b, h, t in ((1, 2, 3, 4), (4, 3, 2, 17), (6, 1, 4, 5)):
        w = [torch.softmax(3 * torch.randn(b, h, t, t, generator=g), -1) for _ in range(num_layers)]
        calls.append(_call("attention_rollout", w, hidden=True))
    return calls


# ---- the trained model ----------------------------------------------------------------------

_cache: dict = {}


def _digits():
    """The course's digit splits (load_digit_images), loaded once per process."""
    if "digits" not in _cache:
        from course_utils.data import load_digit_images
        _cache["digits"] = load_digit_images()
    return _cache["digits"]


def config():
    """The notebook's ``cfg`` (cell train_or_load)."""
    from course_utils.vit import ViTConfig
    return ViTConfig(image_size=8, patch_size=2, channels=1, num_classes=10, d_model=48, num_heads=4, num_layers=2,
                     d_ff=96, dropout=0.0)


def checkpoint_problem(state) -> str:
    """Why the loaded checkpoint ``state`` does not fit the notebook's ``cfg`` ('' if it does)."""
    from course_utils.training import _config_dict, _with_defaults
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        return f"{CHECKPOINT} is not a checkpoint of the course (save_checkpoint)"
    if _config_dict(config()) != _with_defaults(config(), state.get("config") or {}):
        return f"{CHECKPOINT} was saved with another configuration"
    return ""


def trained_calls(state):
    """The student's ViT with the student's weights on the validation and test digits."""
    import dataclasses

    import torch
    digits = _digits()
    return [{"fn": "ViT", "init": [{"$make": {"fn": "ViTConfig", "args": [], "kwargs": dataclasses.asdict(config())}}],
             "state": dict(state["model"]), "args": [torch.cat([digits.valid.images, digits.test.images])],
             "hidden": True, "message": "with the same weights, your model and the reference one disagree"}]


def trained_verdict(state) -> tuple[bool, str]:
    """The test cell's threshold, computed here with the reference ViT holding the student's
    weights: accuracy above THRESHOLD on the validation digits, and (hidden) on the test digits."""
    import torch
    from course_utils.vit import ViT
    digits = _digits()
    model = ViT(config())
    model.load_state_dict(state["model"])
    model.eval()
    with torch.no_grad():
        valid = (model(digits.valid.images).argmax(-1) == digits.valid.labels).float().mean().item()
        test = (model(digits.test.images).argmax(-1) == digits.test.labels).float().mean().item()
    if not valid > THRESHOLD:
        return False, (f"validation accuracy {valid:.1%} is too low (more than {THRESHOLD:.0%} needed): "
                       "check the model and train longer")
    if not test > THRESHOLD:
        return False, "a hidden case: the accuracy on the test digits is too low"
    return True, ""


QUESTIONS = {
    "test_patchify": Question(patchify_calls, reference),
    "test_unpatchify": Question(unpatchify_calls, reference),
    "test_embed": Question(embed_calls, reference),
    "test_forward": Question(forward_calls, reference),
    "test_rollout": Question(rollout_calls, reference),
    "test_accuracy": TrainedModelQuestion(CHECKPOINT, trained_calls, reference, trained_verdict, checkpoint_problem),
}
