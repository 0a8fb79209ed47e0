"""The worker scripts the 2-rank torchrun tests start (test_multirank.py):
``python -m torch.distributed.run ... dist_jobs.py VERB DIR``. Each rank prints
one ``RESULT <json>`` line the test reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import dist_models as dm


def pair(out: str, name: str, rank: int) -> tuple[str, str]:
    return os.path.join(out, f"{name}.{rank}.py"), os.path.join(out, f"{name}.{rank}.cache")


def report(**fields: object) -> None:
    # one write under PIPE_BUF: the ranks share the pipe and must not interleave
    sys.stdout.flush()
    os.write(1, ("RESULT " + json.dumps(fields) + "\n").encode())


def capture(out: str) -> None:
    import torch_precompile as precompile

    rank = dist.get_rank()
    model, x = dm.make(rank)
    got = {}
    for name, backend in (("step_ar", "inductor"), ("step_rank", "eager"), ("step_env", "eager")):
        fn = getattr(dm, name)
        code, cache = pair(out, name, rank)
        with precompile.capture(fn, artifact_path=code, cache_path=cache, backend=backend) as cap:
            y = cap(model, x)
        got[name] = torch.allclose(y, fn(model, x), atol=1e-5)
    makefx = None
    try:  # make_fx takes the live group into the graph: refused at capture
        code, cache = pair(out, "makefx", rank)
        with precompile.capture(dm.step_ar, artifact_path=code, cache_path=cache, backend="eager",
                                tracer=precompile.MakeFxTracer()) as cap:
            cap(model, x)
    except precompile.PrecompileError as e:
        makefx = str(e)
    ddp = None
    try:  # make_fx cannot lift DDP's buckets: refused before anything runs, naming the remedy
        code, cache = pair(out, "ddp_makefx", rank)
        with precompile.capture(dm.step_train, artifact_path=code, cache_path=cache, backend="eager",
                                tracer=precompile.MakeFxTracer()) as cap:
            cap(DDP(model), x)
    except precompile.PrecompileError as e:
        ddp = str(e)
    # DynamoTracer: a training step over DDP, lowered by Inductor (the served call
    # runs the compiled backward, the artifact's own code, under the installed entries)
    code, cache = pair(out, "step_ddp", rank)
    with precompile.capture(dm.step_train, artifact_path=code, cache_path=cache) as cap:
        wrapped = DDP(dm.make(rank)[0])
        cap(wrapped, x)
    code, cache = pair(out, "step_grads", rank)
    with precompile.capture(dm.step_grads, artifact_path=code, cache_path=cache, backend="eager") as cap:
        cap(dm.make(rank)[0], x)
    installed = "captured"
    try:  # an installed artifact checks its pins too: the process group by its shape
        code, cache = pair(out, "installed", rank)
        with precompile.capture(dm.step_plain, artifact_path=code, cache_path=cache, backend="eager") as cap:
            cap(dm.Wrapper(), x)
    except precompile.PrecompileError as e:
        installed = str(e)
    report(rank=rank, pid=os.getpid(), equal=got, makefx=makefx, installed=installed, ddp=ddp)


def serve(out: str) -> None:
    import torch_precompile as precompile

    rank = dist.get_rank()
    model, x = dm.make(rank)
    fns = {name: precompile.load(*pair(out, name, rank)) for name in ("step_ar", "step_rank")}
    lean = "torch._dynamo" not in sys.modules  # loaded without Dynamo (DYNAMO_FREE)
    served = {name: f(model, x) for name, f in fns.items()}
    eager = {name: getattr(dm, name)(model, x) for name in fns}
    # rank 0's pair of a step whose graph never read the rank: it serves every rank
    shared = precompile.load(*pair(out, "step_ar", 0))(model, x)
    # rank 0's pair of the training step with the all-reduce in fn: the gradients
    # and loss of DistributedDataParallel over the same model, on every rank
    served_model, reference = dm.make(rank)[0], dm.make(rank)[0]
    loss = precompile.load(*pair(out, "step_grads", 0))(served_model, x)
    reference_ddp = DDP(reference)  # held: a collected wrapper takes its gradient hooks with it
    reference_loss = reference_ddp(x).sum()
    reference_loss.backward()
    grads = torch.allclose(loss, reference_loss) and all(
        torch.allclose(a.grad, b.grad, atol=1e-6) for a, b in zip(served_model.parameters(), reference.parameters()))
    refusals = {}
    # another rank's pair of a rank-baking step: refused, naming the rank
    other = precompile.load(*pair(out, "step_rank", 1 - rank))
    try:
        other(model, x)
    except precompile.PrecompileError as e:
        refusals["other_rank"] = str(e)
    try:  # the same for a step that read torchrun's RANK from os.environ
        precompile.load(*pair(out, "step_env", 1 - rank))(model, x)
    except precompile.PrecompileError as e:
        refusals["env_rank"] = str(e)
    # compile_on_one_rank flipped after capture: refused, naming the slot
    torch.compiler.config.compile_on_one_rank = True
    try:
        fns["step_ar"](model, x)
    except precompile.PrecompileError as e:
        refusals["config"] = str(e)
    finally:
        torch.compiler.config.compile_on_one_rank = False
    # rank 0's pair of the DDP training step: the loss and all-reduced gradients of
    # DDP run eagerly. The eager run first: the installed artifact's entries live
    # on MLP.forward's code object from load() on.
    eager_model = dm.make(rank)[0]
    eager_ddp = DDP(eager_model)
    eager_loss = dm.step_train(eager_ddp, x)
    f = precompile.load(*pair(out, "step_ddp", 0))
    ddp_model = dm.make(rank)[0]
    ddp = DDP(ddp_model)
    ddp_loss = f(ddp, x)
    from torch._C._dynamo.eval_frame import _debug_get_precompile_entries

    ddp_served = {
        "installed": f.installed,
        "forward_entries": len(_debug_get_precompile_entries(dm.MLP.forward.__code__)),
        "loss": torch.allclose(ddp_loss, eager_loss, atol=1e-5),
        "grads": all(torch.allclose(a.grad, b.grad, atol=1e-6)
                     for a, b in zip(ddp_model.parameters(), eager_model.parameters())),
    }
    # this rank's installed pair (a graph break inside a child's forward, an
    # all-reduce after it): its pins check the process group on every call
    wrapper = dm.Wrapper()
    eager_installed = dm.step_plain(wrapper, x.clone())
    installed = precompile.load(*pair(out, "installed", rank))
    installed_close = installed.installed and torch.allclose(installed(wrapper, x.clone()), eager_installed,
                                                             atol=1e-5)
    report(rank=rank, pid=os.getpid(), lean=lean, ddp=ddp_served, installed=installed_close,
           close={n: torch.allclose(served[n], eager[n], atol=1e-5) for n in fns},
           shared=torch.allclose(shared, eager["step_ar"], atol=1e-5), ddp_grads=grads,
           grad_sum=sum(p.grad.sum().item() for p in served_model.parameters()),
           equal={n: torch.equal(served[n], eager[n]) for n in fns},
           sums={n: served[n].sum().item() for n in fns}, refusals=refusals)


def _sgd_train(model: torch.nn.Module, step, batches: list[torch.Tensor]) -> list[float]:
    """A training loop: SGD with momentum after each step, one batch a step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x in batches:
        losses.append(float(step(model, x)))
        opt.step()
        opt.zero_grad(set_to_none=True)
    return losses


def ddp_buckets_capture(out: str) -> None:
    """A training step over DDP with several gradient buckets, captured over two
    steps on each rank (its own pair)."""
    import torch_precompile as precompile

    rank = dist.get_rank()
    model, batches = dm.make_deep(rank)
    ddp = DDP(model, bucket_cap_mb=dm.BUCKET_CAP_MB)
    with precompile.capture(dm.step_train, artifact_path=pair(out, "ddp_buckets", rank)[0],
                            cache_path=pair(out, "ddp_buckets", rank)[1]) as cap:
        _sgd_train(ddp, cap, batches[:2])
    buckets = len(ddp.reducer._get_zeros_like_grad_buckets())
    report(rank=rank, buckets=buckets, risky=cap.summary().risky_dropped_guards)


def ddp_buckets_serve(out: str) -> None:
    """Each rank's pair serves four steps of DDP from other weights: losses and final
    parameters equal to eager DDP's (the eager run first: the installed entries live
    on Deep.forward's code object from load() on)."""
    import torch_precompile as precompile

    rank = dist.get_rank()
    reference, batches = dm.make_deep(rank, seed=7)
    want = _sgd_train(DDP(reference, bucket_cap_mb=dm.BUCKET_CAP_MB), dm.step_train, batches)
    f = precompile.load(*pair(out, "ddp_buckets", rank))
    model, _ = dm.make_deep(rank, seed=7)
    with precompile.no_compilation():
        got = _sgd_train(DDP(model, bucket_cap_mb=dm.BUCKET_CAP_MB), f, batches)
    params = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(model.parameters(), reference.parameters()))
    report(rank=rank, losses=got, want=want, params=params, installed=f.installed)


def fsdp_capture(out: str) -> None:
    """An FSDP2 training step (fully_shard on each block and the root), captured over
    two steps on each rank (its own pair)."""
    import torch_precompile as precompile

    rank = dist.get_rank()
    model, batches = dm.make_deep(rank)
    code, cache = pair(out, "fsdp", rank)
    with precompile.capture(dm.step_mse, artifact_path=code, cache_path=cache) as cap:
        _sgd_train(dm.fully_sharded(model), cap, batches[:2])
    report(rank=rank, risky=cap.summary().risky_dropped_guards, summary=str(cap.summary()),
           model=type(model).__name__)


def fsdp_serve(out: str) -> None:
    """Each rank's pair serves four FSDP2 steps from other weights: losses and each
    rank's parameter shards equal to eager FSDP2's. Rank 0 loads its pair before
    anything in its process is built or sharded (fully_shard's class registry
    empty), rank 1 once its model is sharded: the order of load and model
    construction does not matter."""
    import torch_precompile as precompile

    rank = dist.get_rank()
    f = precompile.load(*pair(out, "fsdp", rank)) if rank == 0 else None
    model, batches = dm.make_deep(rank, seed=7)
    dm.fully_sharded(model)
    if f is None:
        f = precompile.load(*pair(out, "fsdp", rank))
    with precompile.no_compilation():
        got = _sgd_train(model, f, batches)
    reference, _ = dm.make_deep(rank, seed=7)
    want = _sgd_train(dm.fully_sharded(reference), dm.step_mse, batches)
    params = all(torch.allclose(a.to_local(), b.to_local(), atol=1e-5)
                 for a, b in zip(model.parameters(), reference.parameters()))
    report(rank=rank, losses=got, want=want, params=params, installed=f.installed)


def serve_wrong_world(out: str) -> None:
    """Rank 0's pair in a job of another shape."""
    import torch_precompile as precompile

    model, x = dm.make(0)
    f = precompile.load(*pair(out, "step_ar", 0))
    errors = []
    if not dist.is_initialized():
        try:  # no process group at all
            f(model, x)
        except precompile.PrecompileError as e:
            errors.append(str(e))
        dist.init_process_group("gloo")
    try:
        f(model, x)
    except precompile.PrecompileError as e:
        errors.append(str(e))
    report(rank=dist.get_rank(), world=dist.get_world_size(), errors=errors)


def unmodified() -> None:
    """A job that knows nothing of precompile: it calls dist_models.step_ar, which
    PRECOMPILE_CAPTURE / PRECOMPILE_SERVE may have replaced at import."""
    rank = dist.get_rank()
    model, x = dm.make(rank)
    served = getattr(dm.step_ar, "installed", None) is False  # a loaded runnable
    ys = [dm.step_ar(model, x) for _ in range(2)]
    want = model(x)  # the step by hand, eagerly
    dist.all_reduce(want)
    want = want / dist.get_world_size()
    report(rank=rank, served=served, lean="torch._dynamo" not in sys.modules,
           close=all(torch.allclose(y, want, atol=1e-5) for y in ys))


def probe() -> None:
    """One compiler version probe per rank: refused under --strict, journaled."""
    try:
        rc = subprocess.run(["g++", "--version"], capture_output=True).returncode
    except PermissionError:  # the shim refused the exec
        rc = "EPERM"
    report(rank=dist.get_rank(), pid=os.getpid(), ppid=os.getppid(), rc=rc)


def main() -> None:
    verb = sys.argv[1]
    if verb != "serve_wrong_world":
        dist.init_process_group("gloo")
    if verb in ("probe", "unmodified"):
        globals()[verb]()
    else:
        globals()[verb](sys.argv[2])
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    # Skip the interpreter's teardown, which gloo's threads can abort ("terminate
    # called without an active exception", SIGABRT after the job's work is done);
    # the atexit handlers (the zero-code capture's final write) run first.
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
