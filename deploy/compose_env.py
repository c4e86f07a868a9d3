"""Turn a compose file's services into plain local process invocations.

No Docker engine runs where privfed is tested, so ``tests/integration/test_compose.py`` starts
exactly the commands and environment that ``docker-compose.yml`` declares, as processes on one
host, and this module does the translation the container runtime would otherwise make
unnecessary. It is generic over the compose file (no privfed service names in here):

* **Interpolation** as Compose does it: ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
  ``${VAR-default}``, ``${VAR:?error}``, ``${VAR?error}``, ``${VAR:+alt}``, ``${VAR+alt}`` and
  ``$$``, from the given environment over the project's ``.env`` file.
* **Profiles**: a service runs when it has none or one of the active profiles (the argument,
  else ``COMPOSE_PROFILES``); services come out in ``depends_on`` order.
* **Argv**: the service's ``entrypoint``/``command``, else the image's ``ENTRYPOINT``/``CMD``
  read from the Dockerfile its ``build`` names (as Docker does: a service ``entrypoint``
  drops the image ``CMD``). The program name is mapped through ``executables``.
* **Addresses**: every service gets ``host`` (loopback) and each ``expose``\\ d port a free local
  port. ``SERVICE:PORT`` in an argument becomes ``host:local``, and a service's own listen
  address (``0.0.0.0``, ``[::]``, ``127.0.0.1`` or ``localhost`` with an exposed port) too.
  Bare host names without a port (TLS names, certificate SANs) are left as written. Or, with
  ``map_addresses=False``, nothing is rewritten: each service runs in a network namespace of its
  own where the service names resolve (``deploy/netns.py``), as in a container network.
* **Volumes**: a named volume becomes ``root/volumes/<name>``, a bind mount its host path, an
  anonymous volume ``root/anonymous/<service>-<n>/<path>`` (one per replica, as Compose makes one
  per container); an argument or environment value that is a mount path (or below one, also after ``--opt=``)
  is rewritten to the host directory.
* **Replicas**: ``deploy.replicas`` (or ``scale``), overridable per service.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError

_VAR = re.compile(
    r"\$(?:(?P<escaped>\$)|(?P<named>[_a-zA-Z][_a-zA-Z0-9]*)"
    r"|\{(?P<braced>[_a-zA-Z][_a-zA-Z0-9]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\})"
)
_LISTEN_HOSTS = ("0.0.0.0", "[::]", "127.0.0.1", "localhost")


def default_executables() -> dict[str, list[str]]:
    """Program names of the privfed image, mapped to this interpreter."""
    return {
        "python": [sys.executable],
        "python3": [sys.executable],
        "privfed": [sys.executable, "-m", "privfed.deploy.cli"],
    }


@dataclass(frozen=True)
class Invocation:
    """One process to start: a replica of a service, as the container would have run it."""

    service: str
    replica: int
    argv: list[str]
    env: dict[str, str]  # the service's declared environment only
    depends_on: dict[str, str]  # service -> condition
    healthcheck: list[str] | None = None  # argv of the service's health check, if any
    ports: dict[int, int] = field(default_factory=dict)  # exposed container port -> local port

    @property
    def name(self) -> str:
        return f"{self.service}-{self.replica + 1}"


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose variable substitution in one string."""

    def sub(m: re.Match) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("named") or m.group("braced")
        op, arg, value = m.group("op"), m.group("arg") or "", env.get(name)
        if op is None:
            return value or ""
        if value is None or (value == "" and op.startswith(":")):  # unset (or empty, for the ":" forms)
            if op.endswith("-"):
                return arg
            if op.endswith("+"):
                return ""
            raise ConfigError(f"required variable {name} is missing a value: {arg or '(no message)'}")  # ? and :?
        return arg if op.endswith("+") else value

    return _VAR.sub(sub, text)


def _interpolate_tree(node: object, env: dict[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interpolate_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, env) for k, v in node.items()}
    return node


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (comments, blank lines and optional quotes allowed)."""
    env = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                    value = value[1:-1]
                env[key.strip().removeprefix("export ").strip()] = value
    return env


def dockerfile_defaults(path: Path) -> dict[str, list[str] | None]:
    """``ENTRYPOINT``, ``CMD`` and ``HEALTHCHECK`` command of the final stage of a Dockerfile."""
    text = re.sub(r"\\\n", " ", path.read_text())
    found: dict[str, list[str] | None] = {"entrypoint": None, "cmd": None, "healthcheck": None}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "FROM":
            found = dict.fromkeys(found)
        elif word in ("ENTRYPOINT", "CMD"):
            found[word.lower()] = _exec_form(rest)
        elif word == "HEALTHCHECK":
            if rest.upper() == "NONE":
                found["healthcheck"] = None
            else:
                m = re.search(r"(?:^|\s)CMD\s+(.*)$", rest)
                found["healthcheck"] = _exec_form(m.group(1)) if m else None
    return found


def _exec_form(text: str) -> list[str]:
    if text.startswith("["):
        return [str(v) for v in json.loads(text)]
    return ["/bin/sh", "-c", text]


def _as_argv(value: str | list[object] | None) -> list[str] | None:
    if value is None:
        return None
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ComposeProject:
    """A parsed, interpolated compose file.

    Parameters
    ----------
    path : Path
        The compose file. Its directory is the project directory (``.env``, build contexts,
        relative bind mounts).
    environ : dict, optional
        Variables for interpolation, over the ``.env`` file; default ``os.environ``.
    """

    def __init__(self, path: str | Path, environ: dict[str, str] | None = None):
        import yaml  # test-only dependency (the `test` extra); the runtime never parses compose files

        self.path = Path(path).resolve()
        self.dir = self.path.parent
        self.env = read_dotenv(self.dir / ".env") | dict(os.environ if environ is None else environ)
        raw = yaml.safe_load(self.path.read_text())  # resolves anchors and `<<` merge keys
        if not isinstance(raw, dict) or not isinstance(raw.get("services"), dict):
            raise ConfigError(f"{self.path}: no services mapping")
        data = _interpolate_tree(raw, self.env)
        self.services: dict[str, dict] = data["services"]
        self.volumes: dict[str, dict] = {k: v or {} for k, v in (data.get("volumes") or {}).items()}

    def active_profiles(self, profiles: list[str] | None = None) -> list[str]:
        if profiles is not None:
            return list(profiles)
        return [p for p in self.env.get("COMPOSE_PROFILES", "").split(",") if p]

    def enabled(self, profiles: list[str] | None = None) -> list[str]:
        """Service names enabled by the profiles, dependencies before dependents."""
        active = set(self.active_profiles(profiles))
        names = [n for n, s in self.services.items() if not s.get("profiles") or active & set(s["profiles"])]
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in order:
                return
            if name in path:
                raise ConfigError(f"depends_on cycle: {' -> '.join(path + (name,))}")
            for dep in self.depends_on(name):
                if dep not in names:
                    raise ConfigError(
                        f"service {name!r} depends on {dep!r}, which the active profiles {sorted(active)} do not enable"
                    )
                visit(dep, path + (name,))
            order.append(name)

        for n in names:
            visit(n, ())
        return order

    def depends_on(self, name: str) -> dict[str, str]:
        deps = self.services[name].get("depends_on") or {}
        if isinstance(deps, list):
            return {d: "service_started" for d in deps}
        return {d: (spec or {}).get("condition", "service_started") for d, spec in deps.items()}

    def replicas(self, name: str) -> int:
        s = self.services[name]
        return int((s.get("deploy") or {}).get("replicas", s.get("scale", 1)))

    def _image_defaults(self, service: dict) -> dict[str, list[str] | None]:
        build = service.get("build")
        if build is None:
            return {"entrypoint": None, "cmd": None, "healthcheck": None}
        context = build if isinstance(build, str) else build.get("context", ".")
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        return dockerfile_defaults(self.dir / context / dockerfile)

    @staticmethod
    def volume_specs(service: dict) -> list[tuple[str | None, str, bool]]:
        """``(source, target, read_only)`` of each of a service's volumes (source None: anonymous)."""
        specs = []
        for spec in service.get("volumes") or []:
            if isinstance(spec, dict):
                specs.append((spec.get("source"), spec["target"], bool(spec.get("read_only"))))
            else:
                parts = spec.split(":")
                source, target = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
                specs.append((source, target, len(parts) > 2 and "ro" in parts[2].split(",")))
        return specs

    def mounts(self, name: str, root: str | Path, replica: int = 0) -> list[tuple[str, Path]]:
        """``(container path, host directory)`` of each volume of replica ``replica`` of ``name``.

        Named volumes are shared (``root/volumes/<name>``); an anonymous volume belongs to one
        container, as in Compose (``root/anonymous/<service>-<replica+1>/<path>``).
        """
        root = Path(root)
        mounts = []
        for source, target, _ in self.volume_specs(self.services[name]):
            if source is None:
                host = root / "anonymous" / f"{name}-{replica + 1}" / target.strip("/").replace("/", "_")
            elif source.startswith((".", "/", "~")):
                host = (self.dir / Path(source).expanduser()).resolve()
            else:
                host = root / "volumes" / source
            if not host.is_file():  # a bind-mounted file stays a file
                host.mkdir(parents=True, exist_ok=True)
            mounts.append((target.rstrip("/") or "/", host))
        return sorted(mounts, key=lambda m: -len(m[0]))  # longest mount path first

    def invocations(
        self,
        root: str | Path,
        *,
        profiles: list[str] | None = None,
        scale: dict[str, int] | None = None,
        executables: dict[str, list[str]] | None = None,
        host: str = "127.0.0.1",
        map_addresses: bool = True,
    ) -> list[Invocation]:
        """Every replica of every enabled service as a local process, in dependency order.

        Parameters
        ----------
        root : path
            Directory under which named volumes become ``volumes/<name>``.
        profiles : list of str, optional
            Active profiles; default ``COMPOSE_PROFILES`` from the environment or ``.env``.
        scale : dict, optional
            Replica count per service, overriding ``deploy.replicas`` (``--scale``).
        executables : dict, optional
            Program name -> argv prefix; default :func:`default_executables`.
        host : str
            The address every service host name and listen address is mapped to.
        map_addresses : bool
            False: leave service names and ports as written, for processes that each run in a
            network namespace of their own where the service names resolve (``deploy/netns.py``).
        """
        root = Path(root)
        executables = default_executables() if executables is None else executables
        names = self.enabled(profiles)
        ports = {
            n: {int(str(p).split("/")[0]): _free_port(host) for p in self.services[n].get("expose") or []}
            if map_addresses
            else {}
            for n in names
        }
        out = []
        for name in names:
            service = self.services[name]
            image = self._image_defaults(service)
            entrypoint = _as_argv(service.get("entrypoint"))
            command = _as_argv(service.get("command"))
            if entrypoint is None:
                entrypoint = image["entrypoint"] or []
                command = command if command is not None else (image["cmd"] or [])
            argv = [*entrypoint, *(command or [])]
            if not argv:
                raise ConfigError(f"service {name!r}: no command, and its image declares none")
            health = self._healthcheck(service, image)
            count = (scale or {}).get(name, self.replicas(name))
            for i in range(count):  # per replica: each container has its own anonymous volumes
                rewrite = _Rewriter(host, ports, own=name, mounts=self.mounts(name, root, i))
                check = (
                    None if health is None else [*executables.get(health[0], [health[0]]), *map(rewrite, health[1:])]
                )
                env = {k: rewrite(v) for k, v in _environment(service, self.dir).items()}
                out.append(
                    Invocation(
                        name,
                        i,
                        [*executables.get(argv[0], [argv[0]]), *map(rewrite, argv[1:])],
                        env,
                        self.depends_on(name),
                        check,
                        dict(ports[name]),
                    )
                )
        return out

    @staticmethod
    def _healthcheck(service: dict, image: dict) -> list[str] | None:
        spec = service.get("healthcheck")
        if spec is None:
            return image["healthcheck"]
        if spec.get("disable"):
            return None
        test = spec.get("test")
        if test is None:
            return image["healthcheck"]
        test = _as_argv(test) if not isinstance(test, str) else ["CMD-SHELL", test]
        if not test or test[0] == "NONE":
            return None
        if test[0] == "CMD-SHELL":
            return ["/bin/sh", "-c", " ".join(test[1:])]
        return test[1:] if test[0] == "CMD" else test


def _environment(service: dict, project_dir: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    files = service.get("env_file") or []
    for f in [files] if isinstance(files, str) else files:
        env |= read_dotenv(project_dir / (f if isinstance(f, str) else f["path"]))
    declared = service.get("environment") or {}
    if isinstance(declared, list):
        declared = dict(item.split("=", 1) if "=" in item else (item, os.environ.get(item)) for item in declared)
    env |= {k: "" if v is None else str(v) for k, v in declared.items()}
    return env


class _Rewriter:
    """Maps one argument (or environment value) from the container's view to the host's."""

    def __init__(self, host: str, ports: dict[str, dict[int, int]], *, own: str, mounts: list[tuple[str, Path]]):
        self._host = host
        self._mounts = mounts
        self._addr: dict[str, str] = {}
        for svc, mapping in ports.items():
            hosts = [svc] + (list(_LISTEN_HOSTS) if svc == own else [])
            for h in hosts:
                for cport, local in mapping.items():
                    self._addr[f"{h}:{cport}"] = f"{host}:{local}"
        pattern = "|".join(re.escape(a) for a in sorted(self._addr, key=len, reverse=True))
        self._addr_re = re.compile(rf"(?<![\w.-])(?:{pattern})(?![\w])") if pattern else None

    def __call__(self, value: str) -> str:
        if self._addr_re is not None:
            value = self._addr_re.sub(lambda m: self._addr[m.group(0)], value)
        prefix, sep, rest = value.partition("=") if value.startswith("-") else ("", "", value)
        return prefix + sep + self._path(rest)

    def _path(self, value: str) -> str:
        for target, host in self._mounts:
            if value == target or value.startswith(target + "/"):
                return str(host) + value[len(target) :]
        return value
