"""Probe jobs as Ray Jobs, through the Jobs REST API that a Ray head's dashboard serves (the API that Ray's
JobSubmissionClient calls; ray 2.55: dashboard/modules/job/job_head.py routes, common.py JobSubmitRequest and
JobStatus): POST /api/jobs/ with the probe as the entrypoint, `entrypoint_num_gpus` for its GPUs and the job's own id
as `submission_id` (Ray refuses a second job of one id, so a resubmission after a crash cannot run a probe twice), GET
/api/jobs/<id> for its status, POST /api/jobs/<id>/stop to cancel. Ray has no job arrays: a sweep is one job each.
Plain HTTP (urllib): the API process needs no ray installed.

JobStatus maps to State: PENDING and RUNNING are live; SUCCEEDED and FAILED with the entrypoint's exit code are the
probe's own end; FAILED without one (the node or the job's supervisor died) and STOPPED by anyone but the API are the
job lost, with Ray's message.
"""

from __future__ import annotations

import json
import shlex
import urllib.error
import urllib.request

from api.executors import State, Submission, code_root, probe_command


class RayError(RuntimeError):
    pass


class Ray:
    kind = "ray"

    def __init__(self, settings) -> None:
        self.settings = settings
        self.base = settings.ray_address.rstrip("/")

    def _call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | str]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read().decode()
                code = r.status
        except urllib.error.HTTPError as e:
            code, text = e.code, e.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as e:
            raise RayError(f"Ray Jobs API at {self.base}: {e}") from None
        try:
            return code, json.loads(text)
        except ValueError:
            return code, text

    def submit(self, subs: list[Submission], name: str) -> list[str]:
        ids = []
        for sub in subs:
            env = {"PYTHONPATH": code_root(), **sub.env}
            body = {
                "entrypoint": " ".join(shlex.quote(p) for p in probe_command(self.settings, sub)),
                "submission_id": f"memplan-{sub.jid}",
                "runtime_env": {"env_vars": env},
                "entrypoint_num_cpus": 1,
                "entrypoint_num_gpus": self.settings.probe_gpus,
                "metadata": {"memplan_job": sub.jid, "sweep": name},
            }
            if self.settings.ray_resources:  # a node pool: the job's supervisor and its probe run on such a node
                body["entrypoint_resources"] = self.settings.ray_resources
            code, got = self._call("POST", "/api/jobs/", body)
            if code != 200 and "already exists" not in str(got):
                raise RayError(str(got).strip().splitlines()[-1] if str(got).strip() else f"HTTP {code}")
            ids.append(f"memplan-{sub.jid}")
        return ids

    def states(self, ids: list[str]) -> dict[str, State]:
        out = {}
        for sid in ids:
            code, got = self._call("GET", f"/api/jobs/{sid}")
            if code == 200 and isinstance(got, dict):
                out[sid] = to_state(got)
        return out

    def find(self, name: str) -> list[str]:
        """The job's submission id if Ray holds a job of it, live or ended (its submitter died before writing the id)."""
        return [name] if self.states([name]) else []  # submission ids are the jobs' own: memplan-<job id>

    def cancel(self, ids: list[str]) -> None:
        for sid in ids:
            self._call("POST", f"/api/jobs/{sid}/stop")


def to_state(job: dict) -> State:
    status, message = job.get("status", "UNKNOWN"), (job.get("message") or "").strip()
    code = job.get("driver_exit_code")
    if status in ("PENDING", "RUNNING"):
        return State(status, message)
    if status == "SUCCEEDED" or (status == "FAILED" and code is not None):
        return State(status, message, terminal=True, returncode=code if code is not None else 0)
    return State(status, message or status, terminal=True, lost=True)
