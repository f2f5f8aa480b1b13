"""rollcache.data: a rollcache.Feeder as a torch IterableDataset.

    import torch, rollcache.data
    ds = rollcache.data.FeederDataset("/mnt/train", schema="x:float32[16],y:int64[1]",
                                      batch_size=32, shuffle=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)   # batches come whole
    for epoch in range(start, epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            ...

The feeder batches, shuffles and splits records between ranks itself, so
the DataLoader must not: batch_size=None and num_workers=0 (the feeder runs
its own native threads; a worker process would copy it).  Under
torch.distributed, each epoch starts with one all-reduce (MIN) of the
ranks' batch counts and every rank stops there: ranks on one mount or one
directory already agree, but nodes whose mounts hold different numbers of
records (the source's rank / world_size split the objects between nodes)
would not, and a rank with more steps would wait forever in DDP's
all-reduce.  equalize=False turns that off.
"""
import torch
import torch.distributed as dist
import torch.utils.data

from . import Feeder

__all__ = ["FeederDataset"]


class FeederDataset(torch.utils.data.IterableDataset):
    """Yields the batches (dicts of tensors) of one epoch per iteration.

    Pass a Feeder, or Feeder's arguments.  len(ds) is the batches of the
    loop that comes next, or of the loop under way, which every rank gets
    (after equalising, once the loop started).
    """

    def __init__(self, *args, feeder=None, equalize=True, **kwargs):
        super().__init__()
        if feeder is None:
            kwargs.setdefault("framework", "torch")
            feeder = Feeder(*args, **kwargs)
        elif args or kwargs:
            raise TypeError("give a feeder or Feeder's arguments, not both")
        self.feeder = feeder
        self.equalize = equalize
        self._limit = None  # (epoch, batches) after equalising

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError("FeederDataset: use DataLoader(..., num_workers=0): the feeder "
                               "reads with its own threads and cannot be copied into workers")
        it = iter(self.feeder)  # the epoch is settled here (set_epoch, or the next one)
        n = len(self.feeder)  # this loop's batches (after a resume: those left)
        if self.equalize and dist.is_available() and dist.is_initialized() \
                and dist.get_world_size() > 1:
            dev = "cpu"
            if dist.get_backend() == "nccl":
                dev = torch.device("cuda", torch.cuda.current_device())
            t = torch.tensor([n], dtype=torch.int64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
            if int(t.item()) < n:
                n = int(t.item())
                self.feeder.truncate(self.feeder.position + n)
        self._limit = (self.feeder.epoch, n)
        return it

    def __len__(self):
        # inside a loop: its equalised batches; between loops: the next
        # loop's (len(Feeder): equalised when that loop starts)
        if self._limit is not None and self._limit[0] == self.feeder.epoch \
                and self.feeder._in_loop():
            return self._limit[1]
        return len(self.feeder)

    def set_epoch(self, epoch):
        self.feeder.set_epoch(epoch)

    def state_dict(self):
        return self.feeder.state_dict()

    def load_state_dict(self, state):
        self.feeder.load_state_dict(state)

    def close(self):
        self.feeder.close()
