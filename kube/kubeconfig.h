// A kubeconfig, read as kubectl reads it (docs/kubernetes.md, "The kubeconfig"): its
// current-context names a context, which names a cluster (where the API server is and how to
// trust it) and a user (how to authenticate). YAML or JSON (JSON is YAML too).
//
// Read on every helper run, never cached: a kubeconfig rewritten with a rotated token
// (`shmipamctl kubeconfig --every`) is what the next run uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace shmipam::kube {

struct Kubeconfig {
    std::string path;                    // the file read: every message names it
    std::string context, cluster, user;  // the names its current context resolved to
    std::string server;                  // clusters[].cluster.server, without a trailing '/'
    // certificate-authority-data, else the file certificate-authority names (relative to the
    // kubeconfig's directory): the CAs the server's certificate must chain to; nullopt: the
    // system's CAs.
    std::optional<std::string> ca_pem;
    bool verify_tls = true;  // false: insecure-skip-tls-verify
    // clusters[].cluster.tls-server-name: the name the server's certificate is checked
    // against (and sent as SNI) instead of the server URL's host; "" for that host.
    std::string tls_server_name;
    // clusters[].cluster.proxy-url: the proxy requests go through (http://, https://,
    // socks5://); "" for none: the environment's proxy variables are never read.
    std::string proxy_url;
    // users[].user: a bearer token (tokenFile's content, trimmed, else token), and/or a client
    // certificate and its key (the *-data fields, else the files they name).
    std::string token;
    std::string client_cert_pem, client_key_pem;
};

// Reads and resolves the kubeconfig at `path`. Code 7 naming the file and what is wrong: it is
// missing or unreadable, not YAML, has no current-context, its context, cluster or user is not
// in it, its cluster has no server (or one not http(s)://) or a proxy-url of another scheme than
// client-go reads (http, https, socks5), a *-data field is not base64, a file
// it names cannot be read, its user authenticates by a means the helper does not use (exec
// plugin, auth provider, username and password). Never throws.
Expected<Kubeconfig> read_kubeconfig(const std::string& path);

// The same, for the text of the file at `path` (relative paths in it are relative to `path`'s
// directory).
Expected<Kubeconfig> parse_kubeconfig(std::string_view text, const std::string& path);

}  // namespace shmipam::kube
