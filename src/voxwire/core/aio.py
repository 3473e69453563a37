"""Running several asyncio jobs as one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


async def first_failure(*jobs: Awaitable[None]) -> None:
    """Run jobs until one ends or fails (its exception is raised); cancel the others."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
