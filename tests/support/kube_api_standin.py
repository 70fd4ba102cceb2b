#!/usr/bin/python3
"""A stand-in for the Kubernetes API server, for tests (docs/testing.md, "The Kubernetes API").

No kube-apiserver package exists on Debian here, so the tests speak to this: HTTPS on loopback
(Python's ssl, the server's certificate given), the API server's authentication (a bearer token,
or a client certificate of a given CA), its authorization answer (403 for a token listed as
forbidden), GET of objects at their API paths, the TokenRequest API (POST
/api/v1/namespaces/NS/serviceaccounts/NAME/token: a service account asks a token of its own,
accepted until it expires), and its `Status` bodies for every error, in the words the API
server writes them. Python 3 standard library only.

Everything is read again on each request, so that a test changes the server's world by writing
files (each by a rename, so a request never reads half of one):

  ROOT/api/v1/namespaces/NS/pods/NAME.json                  a Pod, as the API server gives it
  ROOT/apis/apps/v1/namespaces/NS/statefulsets/NAME.json    a StatefulSet (any /apis/G/V path)
  ROOT/_token               the accepted bearer tokens, one a line (--token-file): rotate by
                            rewriting it
  ROOT/_forbidden-tokens    tokens (or client-certificate common names) answered 403
  ROOT/_issued-tokens       tokens the stand-in issued through TokenRequest ("TOKEN EXPIRY", the
                            expiry in Unix seconds), accepted until they expire
  ROOT/_control.json        faults: {"status": 503}, {"delay_ms": 3000}, {"body": "<html>"},
                            {"reset": true} (the connection closed with a reset, no answer),
                            each optionally for a "prefix" of the path, with "retry_after" (a
                            Retry-After header) and "times" (only the first N requests it
                            matches: "times": 1 fails a request once); or a list of such
                            rules, the first that matches applies
  ROOT/_requests.log        appended by the stand-in, a line per request: method, path, status
                            and the client's port ("GET /api/v1/... 200 41234": requests over
                            one connection share the port)

Run it (it writes its port to --port-file once it listens; port 0 by default: one reserved by
the tests' port protocol, reserve_port below):

  /usr/bin/python3 kube_api_standin.py --root DIR --cert server.crt --key server.key \
      [--client-ca ca.crt] [--port-file FILE] [--port N] [--host 127.0.0.1] \
      [--token-file FILE] [--forbidden-tokens FILE]

or import it (tests/cri): KubeApiStandin(root, cert, key).start(), put_object(root,
pod_object(...)), make_certificates(dir).
"""

import argparse
import errno
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ports import PORT_ATTEMPTS, reserve_port  # noqa: E402

# Who a bearer token authenticates as: the service account shmipam's DaemonSet runs as
# (deploy/kubernetes), so that a 403 reads as the real one does.
TOKEN_USER = "system:serviceaccount:kube-system:shmipam"
# An idle keep-alive connection is closed after this long, so that stopping an in-process
# stand-in does not leave handler threads behind for long.
IDLE_CONNECTION_S = 10

REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 410: "Gone", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}
MESSAGES = {
    401: "Unauthorized",
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: the stand-in was told to fail",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}


def status_object(code, message, reason=None, details=None):
    """The API server's Status body for an error."""
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason or REASONS.get(code, "Unknown"), "code": code}
    if details is not None:
        s["details"] = details
    return s


def parse_object_path(path):
    """(group, version, namespace, plural, name) of an object's path, or None."""
    parts = path.strip("/").split("/")
    if len(parts) == 6 and parts[0] == "api" and parts[2] == "namespaces":
        return "", parts[1], parts[3], parts[4], parts[5]
    if len(parts) == 7 and parts[0] == "apis" and parts[3] == "namespaces":
        return parts[1], parts[2], parts[4], parts[5], parts[6]
    return None


def object_file(root, group, version, namespace, plural, name):
    base = os.path.join(root, "api", version) if not group else os.path.join(root, "apis", group,
                                                                             version)
    return os.path.join(base, "namespaces", namespace, plural, name + ".json")


def read_lines(path):
    try:
        with open(path) as f:
            return {line.strip() for line in f if line.strip()}
    except OSError:
        return set()


# TokenRequest's shortest lifetime, as the API server validates spec.expirationSeconds.
MIN_TOKEN_SECONDS = 600
ISSUED_LOCK = threading.Lock()


def issued_tokens(root):
    """{token: expiry} of the tokens issued through TokenRequest."""
    out = {}
    for line in read_lines(os.path.join(root, "_issued-tokens")):
        token, _, expiry = line.partition(" ")
        try:
            out[token] = int(expiry)
        except ValueError:
            pass
    return out


def rfc3339(unix):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


def write_atomically(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = "%s.tmp.%d.%d" % (path, os.getpid(), threading.get_ident())
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def control_rule(root, path, used, used_lock):
    """The first rule of ROOT/_control.json that matches `path` (its prefix, and while it has
    "times" left: `used` counts each rule's matches by its text), or None."""
    try:
        with open(os.path.join(root, "_control.json")) as f:
            rules = json.load(f)
    except (OSError, ValueError):
        return None
    for rule in rules if isinstance(rules, list) else [rules]:
        if not isinstance(rule, dict) or not path.startswith(rule.get("prefix", "")):
            continue
        if "times" not in rule:
            return rule
        key = json.dumps(rule, sort_keys=True)
        with used_lock:
            if used.get(key, 0) < rule["times"]:
                used[key] = used.get(key, 0) + 1
                return rule
    return None


class Settings:
    def __init__(self, root, token_file=None, forbidden_file=None):
        self.root = root
        self.token_file = token_file or os.path.join(root, "_token")
        self.forbidden_file = forbidden_file or os.path.join(root, "_forbidden-tokens")
        self.log_lock = threading.Lock()
        self.rules_used = {}  # control rules with "times": how many requests each has failed
        self.rules_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection serves a helper's GETs
    server_version = "kube-api-standin"
    timeout = IDLE_CONNECTION_S

    def setup(self):
        # As Go's net/http (the API server's): no Nagle. Else the body, written after the
        # headers, waits for the client's delayed ACK (40 ms a request on Linux).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def log_message(self, *args):  # quiet: the request log is the record
        pass

    def do_GET(self):
        self.serve()

    def do_POST(self):
        self.serve()

    do_PUT = do_PATCH = do_DELETE = do_POST

    @property
    def settings(self):
        return self.server.settings

    def log_request_line(self, status):
        with self.settings.log_lock:
            with open(os.path.join(self.settings.root, "_requests.log"), "a") as f:
                f.write("%s %s %d %d\n" % (self.command, urlsplit(self.path).path, status,
                                            self.client_address[1]))

    def send(self, status, body, content_type="application/json", retry_after=None):
        data = body.encode() if isinstance(body, str) else body
        self.log_request_line(status)
        try:
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", str(retry_after))
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client gave up (its budget) meanwhile

    def send_status(self, code, message, reason=None, details=None, retry_after=None):
        self.send(code, json.dumps(status_object(code, message, reason, details)),
                  retry_after=retry_after)

    def reset(self):
        """Closes the connection with a reset and no answer (logged with status 0), as a load
        balancer whose backend went away does."""
        self.log_request_line(0)
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
        except OSError:
            pass

    def user(self):
        """(user, credential) of the request, or None: a verified client certificate first,
        then the bearer token, as the API server's authenticators are tried."""
        cert = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        if cert:
            for rdn in cert.get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        return value, value
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
            if token and token in read_lines(self.settings.token_file):
                return TOKEN_USER, token
            if issued_tokens(self.settings.root).get(token, 0) > time.time():
                return TOKEN_USER, token
        return None

    def token_request(self, namespace, name, user):
        """POST .../serviceaccounts/NAME/token: a token of the requester's own service account
        (the RBAC the DaemonSet is given: create on serviceaccounts/token, resourceNames its
        own), for spec.expirationSeconds."""
        if user != "system:serviceaccount:%s:%s" % (namespace, name):
            return self.send_status(
                403, 'serviceaccounts "%s" is forbidden: User "%s" cannot create resource '
                '"serviceaccounts/token" in API group "" in the namespace "%s"'
                % (name, user, namespace), details={"name": name, "kind": "serviceaccounts"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            seconds = int(body.get("spec", {}).get("expirationSeconds", 3600))
        except (ValueError, TypeError, AttributeError):
            return self.send_status(400, "the body is not a TokenRequest")
        if seconds < MIN_TOKEN_SECONDS:
            return self.send_status(
                422, "TokenRequest.authentication.k8s.io \"%s\" is invalid: "
                "spec.expirationSeconds: Invalid value: %d: may not specify a duration less "
                "than 10 minutes" % (name, seconds), reason="Invalid")
        token = "standin-issued-" + uuid.uuid4().hex
        expiry = int(time.time()) + seconds
        with ISSUED_LOCK:
            with open(os.path.join(self.settings.root, "_issued-tokens"), "a") as f:
                f.write("%s %d\n" % (token, expiry))
        return self.send(201, json.dumps({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": rfc3339(time.time())},
            "spec": {"audiences": ["https://kubernetes.default.svc"],
                     "expirationSeconds": seconds, "boundObjectRef": None},
            "status": {"token": token, "expirationTimestamp": rfc3339(expiry)}}))

    def serve(self):
        path = urlsplit(self.path).path
        rule = control_rule(self.settings.root, path, self.settings.rules_used,
                            self.settings.rules_lock)
        if rule and rule.get("delay_ms"):
            time.sleep(rule["delay_ms"] / 1000.0)
        if rule and rule.get("reset"):
            return self.reset()
        if rule and "body" in rule:
            return self.send(rule.get("status", 200), rule["body"], "text/html",
                             retry_after=rule.get("retry_after"))
        if rule and rule.get("status"):
            code = rule["status"]
            return self.send_status(code, MESSAGES.get(code, "forced by the stand-in"),
                                    retry_after=rule.get("retry_after"))
        who = self.user()
        if who is None:
            return self.send_status(401, "Unauthorized")
        user, credential = who
        parts = path.strip("/").split("/")
        if (self.command == "POST" and len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"]
                and parts[4] == "serviceaccounts" and parts[6] == "token"):
            if credential in read_lines(self.settings.forbidden_file):
                return self.send_status(403, "forbidden")
            return self.token_request(parts[3], parts[5], user)
        parsed = parse_object_path(path)
        if self.command != "GET":
            return self.send_status(405, "the stand-in serves GET, and POST of TokenRequest, only")
        if parsed is None:
            return self.send_status(404, "the server could not find the requested resource")
        group, version, namespace, plural, name = parsed
        what = plural + ("." + group if group else "")
        forbidden = read_lines(self.settings.forbidden_file)
        if credential in forbidden or user in forbidden:
            # Word for word as the API server's RBAC denial.
            in_group = '"%s"' % group
            return self.send_status(
                403, '%s "%s" is forbidden: User "%s" cannot get resource "%s" in API group %s '
                'in the namespace "%s"' % (what, name, user, plural, in_group, namespace),
                details={"name": name, "group": group, "kind": plural} if group else
                {"name": name, "kind": plural})
        if ".." in (namespace, name, plural, group, version):
            return self.send_status(400, "bad path")
        try:
            with open(object_file(self.settings.root, group, version, namespace, plural, name),
                      "rb") as f:
                body = f.read()
        except OSError:
            details = {"name": name, "kind": plural}
            if group:
                details["group"] = group
            return self.send_status(404, '%s "%s" not found' % (what, name), details=details)
        return self.send(200, body)


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that failed TLS or went away: the test sees it from the client's side


def ssl_context(cert, key, client_ca=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca:
        # A client certificate is asked for, and authenticates when it verifies; without one
        # the bearer token is used (the API server's --client-ca-file).
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


class KubeApiStandin:
    """The stand-in in this process, serving from a thread (for Python suites)."""

    def __init__(self, root, cert, key, client_ca=None, token_file=None, forbidden_file=None,
                 host="127.0.0.1", port=0):
        self.settings = Settings(root, token_file, forbidden_file)
        self.context = ssl_context(cert, key, client_ca)
        self.host, self.port = host, port
        self.server = None
        self.thread = None

    def start(self):
        """Listens on self.port, or (0) on a reserved port, again on another if it was taken."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            port = self.port or reserve_port()
            try:
                self.server = QuietServer((self.host, port), Handler)
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE or self.port or attempt == PORT_ATTEMPTS:
                    raise
        self.server.settings = self.settings
        # The handshake in the connection's own thread, not in the accepting one.
        self.server.socket = self.context.wrap_socket(self.server.socket, server_side=True,
                                                      do_handshake_on_connect=False)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.port

    def serve_forever(self):
        self.start()
        self.thread.join()

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self):
        return "https://%s:%d" % (self.host, self.port)


# ---- objects as the API server gives them --------------------------------------------------

def _metadata(namespace, name, uid):
    return {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4()),
            "resourceVersion": str(int(time.time() * 1000) % 10**9),
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def pod_object(namespace, name, uid=None, labels=None, annotations=None, owners=None,
               node_name=None):
    """owners: [{"apiVersion", "kind", "name", "uid", "controller"}]."""
    meta = _metadata(namespace, name, uid)
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if owners:
        meta["ownerReferences"] = [dict(o, blockOwnerDeletion=True) for o in owners]
    spec = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Pending"}}


def statefulset_object(namespace, name, replicas=None, ordinals_start=None, deleting=False,
                       uid=None):
    """replicas / ordinals_start None: left out, as a manifest that does not set them."""
    meta = _metadata(namespace, name, uid)
    if deleting:
        meta["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    spec = {"serviceName": name, "selector": {"matchLabels": {"app": name}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if ordinals_start is not None:
        spec["ordinals"] = {"start": ordinals_start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": spec}


def _plural(obj):
    return {"Pod": "pods", "StatefulSet": "statefulsets"}[obj["kind"]]


def put_object(root, obj):
    """Writes `obj` where the stand-in serves it (by a rename); its path."""
    api = obj["apiVersion"]
    group, version = api.split("/") if "/" in api else ("", api)
    meta = obj["metadata"]
    path = object_file(root, group, version, meta["namespace"], _plural(obj), meta["name"])
    write_atomically(path, json.dumps(obj, indent=1))
    return path


def remove_object(root, api_version, plural, namespace, name):
    group, version = api_version.split("/") if "/" in api_version else ("", api_version)
    try:
        os.unlink(object_file(root, group, version, namespace, plural, name))
    except FileNotFoundError:
        pass


def make_certificates(directory):
    """A CA (ca.crt), the server's certificate for 127.0.0.1 (server.crt/.key) and a client's
    (client.crt/.key, CN shmipam-node) signed by it, with the openssl command line."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    def path(name):
        return os.path.join(directory, name)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", path("ca.key"), "-out", path("ca.crt"), "-days", "2",
        "-subj", "/CN=shmipam test kube CA")
    for name, cn, ext in (("server", "127.0.0.1",
                           "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                          ("client", "shmipam-node", "extendedKeyUsage=clientAuth\n")):
        with open(path(name + ".ext"), "w") as f:
            f.write(ext)
        run("req", "-new", *ec, "-keyout", path(name + ".key"), "-out", path(name + ".csr"),
            "-subj", "/CN=" + cn)
        run("x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.crt"), "-CAkey",
            path("ca.key"), "-CAcreateserial", "-out", path(name + ".crt"), "-days", "2",
            "-extfile", path(name + ".ext"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="the objects' tree and the control files")
    p.add_argument("--cert", required=True, help="the server's certificate (PEM)")
    p.add_argument("--key", required=True, help="its key (PEM)")
    p.add_argument("--client-ca", help="accept client certificates this CA signed")
    p.add_argument("--token-file", help="accepted bearer tokens (default ROOT/_token)")
    p.add_argument("--forbidden-tokens", help="tokens answered 403 (default "
                   "ROOT/_forbidden-tokens)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: a reserved one (reserve_port)")
    p.add_argument("--port-file", help="written with the port once it listens")
    a = p.parse_args()
    standin = KubeApiStandin(a.root, a.cert, a.key, a.client_ca, a.token_file,
                             a.forbidden_tokens, a.host, a.port)
    port = standin.start()
    if a.port_file:
        write_atomically(a.port_file, "%d\n" % port)
    try:
        standin.thread.join()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
