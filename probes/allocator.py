"""What a step reserves, not only what it allocates: PyTorch's CUDA caching allocator replayed over the sim's
allocation trace (the real model's step on fake tensors, every storage's birth and death in order).

The rules, from c10/cuda/CUDACachingAllocator.cpp (torch 2.11, default settings: max_split_size unlimited, no
expandable segments, no power-of-two rounding):
- a request is rounded up to 512 bytes (round_size, kMinBlockSize);
- requests up to 1 MiB (kSmallSize) come from the small pool, whose segments are 2 MiB (kSmallBuffer); larger ones
  from the large pool, whose new segment is 20 MiB (kLargeBuffer) for a request under 10 MiB (kMinLargeAlloc) and the
  request rounded up to 2 MiB (kRoundLarge) otherwise (get_allocation_size);
- a request takes the smallest cached free block of its pool that holds it, lowest address first among equal sizes
  (get_free_block: BlockPool's set ordered by stream, size, address); the block is split when what remains is at least
  512 bytes (small pool) or more than 1 MiB (large pool) (should_split);
- a freed block merges with free neighbours of its segment (free_block, try_merge_blocks) and stays cached;
- with no cached block, a new segment is reserved (alloc_block); where that would pass the limit the allocator frees
  every cached segment that is wholly free and tries once more (release_cached_blocks), then fails: the OOM. The step
  between, release_available_cached_blocks, returns false at its first statement while max_split_size is unlimited,
  its default (malloc's retry chain; the constants kMinBlockSize ... kRoundLarge at the top of the file; read at
  pytorch/pytorch 001074d).

`replay` returns the peak reserved and, under a limit, whether the step ran out. It is the test of the analytic
fragmentation prior, which is one number for every shape (overheads.FRAGMENTATION_FRACTION): benchmarks/
gpu_fragmentation.py replays the steps the GPU windows measured and compares with their max_memory_reserved.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
MIN_LARGE_ALLOC = 10 << 20
LARGE_BUFFER = 20 << 20
ROUND_LARGE = 2 << 20


def round_size_bytes(size: int) -> int:
    """round_size: at least 512 bytes, a multiple of 512."""
    return MIN_BLOCK if size < MIN_BLOCK else -(-size // MIN_BLOCK) * MIN_BLOCK


def segment_bytes(size: int) -> int:
    """get_allocation_size: the segment cudaMalloc reserves for a request that no cached block holds."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False)
class Block:
    segment: int
    address: int
    size: int
    small: bool
    free: bool = True
    prev: Block | None = None
    next: Block | None = None


@dataclass
class Allocator:
    """The default caching allocator's bookkeeping; `limit_bytes` caps what it may reserve (None: no cap)."""

    limit_bytes: int | None = None
    reserved: int = 0
    peak_reserved: int = 0
    allocated: int = 0
    peak_allocated: int = 0
    oom_at: int | None = None  # the request (bytes) that could not be served
    pools: dict = field(default_factory=lambda: {True: [], False: []})  # small? -> sorted [(size, address, id)]
    _blocks: dict = field(default_factory=dict)  # id -> free Block in a pool
    _ids: itertools.count = field(default_factory=itertools.count)
    _address: int = 0

    def _insert(self, b: Block) -> None:
        i = next(self._ids)
        self._blocks[i] = b
        bisect.insort(self.pools[b.small], (b.size, b.address, i))

    def _remove(self, b: Block) -> None:
        pool = self.pools[b.small]
        j = bisect.bisect_left(pool, (b.size, b.address))
        del self._blocks[pool[j][2]]
        del pool[j]

    def malloc(self, nbytes: int) -> Block | None:
        size = round_size_bytes(nbytes)
        small = size <= SMALL_SIZE
        pool = self.pools[small]
        j = bisect.bisect_left(pool, (size, -1))
        if j < len(pool):
            block = self._blocks[pool[j][2]]
            self._remove(block)
        else:
            block = self._new_segment(size, small)
            if block is None:
                self.oom_at = nbytes
                return None
        rest = block.size - size
        if (small and rest >= MIN_BLOCK) or (not small and rest > SMALL_SIZE):
            tail = Block(block.segment, block.address + size, rest, small, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            self._insert(tail)
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def _new_segment(self, size: int, small: bool) -> Block | None:
        seg = segment_bytes(size)
        if self.limit_bytes is not None and self.reserved + seg > self.limit_bytes:
            self._release_cached()
            if self.reserved + seg > self.limit_bytes:
                return None
        self.reserved += seg
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self._address += seg + ROUND_LARGE  # segments never touch: merges stay inside one
        return Block(self._address, self._address, seg, small, free=False)

    def _release_cached(self) -> None:
        """release_cached_blocks: every free block that is a whole segment goes back to the device."""
        for small in (True, False):
            for _, _, i in list(self.pools[small]):
                b = self._blocks[i]
                if b.prev is None and b.next is None:
                    self._remove(b)
                    self.reserved -= b.size

    def free(self, block: Block) -> None:
        self.allocated -= block.size
        block.free = True
        for other in (block.prev, block.next):
            if other is not None and other.free:
                self._remove(other)
                if other is block.prev:
                    block.address, block.prev = other.address, other.prev
                    if other.prev is not None:
                        other.prev.next = block
                else:
                    block.next = other.next
                    if other.next is not None:
                        other.next.prev = block
                block.size += other.size
        self._insert(block)


def replay(events, limit_bytes: int | None = None) -> Allocator:
    """Serve a trace of ("a", key, bytes) and ("f", key) events in order; stops at the first request that fails."""
    a, live = Allocator(limit_bytes=limit_bytes), {}
    for ev in events:
        if ev[0] == "a":
            block = a.malloc(ev[2])
            if block is None:
                break
            live[ev[1]] = block
        elif ev[1] in live:
            a.free(live.pop(ev[1]))
    return a
