"""Small modules the front door's tests export: what ExecuTorch's TOSA backend takes whole, and what it
leaves outside (a sort, a custom Python operator), each on a line the tests look up."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class TinyCNN(nn.Module):
    """Conv, ReLU, max pool, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(image))
        x = nn.functional.max_pool2d(x, 2)
        return self.fc(x.flatten(1))


class TwoInTwoOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, features: torch.Tensor, offset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(features) + offset
        return torch.relu(y), y * 2


@torch.library.custom_op("ironaccel_test::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@shift.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Sorting(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=-1).values  # outside: sort


class NotWhole(TinyCNN):
    """A CNN with a custom operator and, in a submodule, a sort: neither lowers to TOSA."""

    def __init__(self) -> None:
        super().__init__()
        self.sorting = Sorting()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = shift(torch.relu(self.conv(image)))  # outside: shift
        x = self.sorting(nn.functional.max_pool2d(x, 2))
        return self.fc(x.flatten(1))


def line_of(marker: str) -> str:
    """``torch_nets.py:LINE`` of the line marked ``# outside: MARKER``."""
    lines = Path(__file__).read_text().splitlines()
    (number,) = [i for i, line in enumerate(lines, 1) if line.endswith(f"# outside: {marker}")]
    return f"{Path(__file__).name}:{number}"
