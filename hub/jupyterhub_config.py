"""JupyterHub for a class of the course: `bash course.sh hub` starts it (hub/classroom.py sets the
class up).

- PAM logins of real Unix accounts (the system's own passwords), LocalProcessSpawner: each user's
  JupyterLab runs as that user, from this environment, in their home (the instructor's: their
  nbgrader course directory).
- Who may log in: STATE/accounts.json (the instructor, an admin, the roster's learners, the teaching
  assistants).
- Every server gets classroom.user_environment: the shared config folder whose nbgrader_config.py
  names the exchange, and for the instructor nbgrader's instructor tools (Formgrader); learners get
  the environment's learner view.
- The instructor's Nbgrader menu opens Formgrader in a browser tab of its own (a user's server
  cannot be framed on a hub: classroom.write_grader_menu), and its links to files reach their
  JupyterLab through the hub's 404 page (hub/templates/404.html).
- The course for every grader, nbgrader's "one class, multiple graders": the instructor's course
  served by jupyterhub-singleuser as the hub's service COURSE (/services/COURSE/, nbgrader's name
  for it), run as the instructor's account (which owns the course, the gradebook, the exchange's
  course folders and the grading sudo rule); the instructor and the teaching assistants reach it
  through a role with its access scope only.
- Each learner's server in a memory, process and CPU cgroup of its own (hub/limits.py):
  $HUB_LEARNER_MEMORY_MB, $HUB_LEARNER_CPUS.
- HTTPS from the instructor's certificate and key ($HUB_SSL_CERT, $HUB_SSL_KEY); idle servers
  stopped by jupyterhub-idle-culler after $HUB_IDLE_MINUTES (course.sh hub passes its options on in
  these).
- State (database, cookie secret, proxy token, pid files) in STATE ($HUB_STATE); the port is
  $HUB_PORT.
"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classroom
import limits

c = get_config()  # injected by traitlets when JupyterHub loads this file

state = classroom.state_dir()
accounts = classroom.Accounts.read(state)


def free_local_port() -> int:
    """A free port of 127.0.0.1 for the hub's own API and the proxy's: two hubs on one machine never
    clash."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# course.sh hub --ssl-cert/--ssl-key
cert, key = os.environ.get("HUB_SSL_CERT"), os.environ.get("HUB_SSL_KEY")
if cert and key:
    c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = cert, key
scheme = "https" if cert and key else "http"
c.JupyterHub.bind_url = (f"{scheme}://{os.environ.get('HUB_IP', '')}:"
                         f"{os.environ.get('HUB_PORT') or classroom.DEFAULT_PORT}")
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{free_local_port()}"
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True   # stopping the hub stops every single-user server
# the hub's pages, one changed: its 404 sends Formgrader's links to the user's JupyterLab
# (hub/templates/404.html)
c.JupyterHub.template_paths = [os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "templates")]

c.ConfigurableHTTPProxy.command = [
    str(state / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{free_local_port()}"
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")
c.ConfigurableHTTPProxy.auth_token = (state / "proxy_token").read_text().strip()

c.JupyterHub.authenticator_class = "pam"
# no login session (systemd-logind) per server: containers have none
c.PAMAuthenticator.open_sessions = False
c.Authenticator.admin_users = {accounts.instructor}
c.Authenticator.allowed_users = {accounts.instructor, *accounts.learners, *accounts.tas}
# only they: an account taken off the roster or --tas can no longer log in (JupyterHub would let
# every user of its database in otherwise)
c.Authenticator.allow_existing_users = False

# LocalProcessSpawner, with a memory, process and CPU cgroup per learner and teaching assistant
# (hub/limits.py; course.sh hub --learner-memory-mb, --learner-cpus); the instructor, who grades in
# their server, has none.
c.JupyterHub.spawner_class = limits.LimitedSpawner
c.LimitedSpawner.memory_bytes = int(os.environ.get("HUB_LEARNER_MEMORY_MB")
                                    or classroom.DEFAULT_LEARNER_MEMORY_MB) * 2 ** 20
c.LimitedSpawner.cpus = float(os.environ.get("HUB_LEARNER_CPUS") or classroom.DEFAULT_LEARNER_CPUS)
c.LimitedSpawner.unlimited = {accounts.instructor}
c.Spawner.cmd = [os.path.join(sys.prefix, "bin", "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120


def per_user(spawner) -> None:
    """The user's environment (classroom.user_environment) and folder: the instructor starts in the
    course."""
    name = spawner.user.name
    spawner.environment = {**spawner.environment,
                           **classroom.user_environment(state, accounts, name)}
    spawner.notebook_dir = str(classroom.course_dir(name)) if name == accounts.instructor else "~"


c.Spawner.pre_spawn_hook = per_user

# Learners' idle servers stopped (their files stay): JupyterHub's own culler, as a hub-managed
# service run as nobody, whose role reaches the group of learners only (never the instructor's
# server, which may be grading in a terminal nobody watches); course.sh hub --idle-minutes
# (0: none).
# The teaching assistants' servers are theirs, like a learner's (they grade in the course's service,
# below), culled too.
idle_minutes = int(os.environ.get("HUB_IDLE_MINUTES") or classroom.DEFAULT_IDLE_MINUTES)
c.JupyterHub.services, c.JupyterHub.load_roles = [], []
if idle_minutes > 0:
    c.JupyterHub.load_groups = {"culled": {"users": [*accounts.learners, *accounts.tas]}}
    c.JupyterHub.services.append({"name": "idle-culler", "user": "nobody", "cwd": "/", "command": [
        sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={idle_minutes * 60}",
        f"--cull-every={max(10, min(300, idle_minutes * 60 // 4))}"]})
    c.JupyterHub.load_roles.append({"name": "idle-culler", "services": ["idle-culler"], "scopes": [
        f"{scope}!group=culled"
        for scope in ("list:users", "read:users:activity", "read:servers", "delete:servers")]})

# The course for every grader (nbgrader's "one class, multiple graders", its demo's set-up for
# JupyterHub 2+): the instructor's course in a JupyterLab served as the hub's service named after
# the course (nbgrader's convention), started and restarted by the hub, as the instructor's account
# (it owns the course; the grading sudo rule is theirs), in the course, with the instructor's
# environment and a menu whose Formgrader is its own. Only the role below reaches it: the instructor
# and the teaching assistants, listed again at every start (JupyterHub makes a role's members
# exactly these: a TA removed from --tas loses it). Never culled (it is no user's server).
# The hub starts it in / (it enters that folder as root, before it becomes the instructor: never one
# the instructor's account could swap for a link, as it could ~/course or a home in a folder of
# theirs); `env -C` then enters the course as the instructor, and the server and its terminals work
# there (JUPYTERHUB_ROOT_DIR names it too).
course = classroom.course_id()
c.JupyterHub.services.append({
    "name": course, "url": f"http://127.0.0.1:{free_local_port()}", "user": accounts.instructor,
    "command": ["/usr/bin/env", "-C", str(classroom.course_dir(accounts.instructor)),
                os.path.join(sys.prefix, "bin", "jupyterhub-singleuser")], "cwd": "/",
    # timeout: a JupyterLab on two busy cores: the hub stops if it is not up in time
    "oauth_no_confirm": True, "timeout": 120,
    "environment": {**classroom.user_environment(state, accounts, accounts.instructor,
                                                 service=True),
                    "JUPYTERHUB_ROOT_DIR": str(classroom.course_dir(accounts.instructor)),
                    "JUPYTERHUB_DEFAULT_URL": "/lab"}})
c.JupyterHub.load_roles.append({"name": f"graders-{course}",
                                "users": [accounts.instructor, *accounts.tas],
                                "scopes": [f"access:services!service={course}"]})
