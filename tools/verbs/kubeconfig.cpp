// shmipamctl kubeconfig: the kubeconfig through which the plugin's Kubernetes helper
// (shmipam-kube) reads pod facts from the API server, written for the host from the pod's
// service account, as Calico's CNI installer writes calico-kubeconfig: one cluster (the API
// server's address and its CA, inline), one user (the service account's token, inline), one
// context, current. Written atomically (a reader sees the old file or the new one whole, also
// after a crash) with mode 0600, and only when its content changes (an unchanged kubeconfig
// keeps its inode). With --every it stays running and rewrites the file whenever the token (or
// the CA, or the server) changes: the kubelet rotates a projected token by swapping the
// volume's `..data` symlink, so each round reads the files anew and compares content, never
// mtimes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "base/base64.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

constexpr const char* kDefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeconfigOptions {
    std::string service_account_dir = kDefaultServiceAccountDir;
    std::string server;  // default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
    std::string out;
    double every_s = 0;  // run again this often until stopped (the DaemonSet's container)
};

// What one round read from the service account.
struct ServiceAccount {
    std::string ca_pem, token, namespace_;
};

std::optional<std::string> read_whole(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    if (f.bad()) return std::nullopt;
    return s.str();
}

std::string trimmed(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The API server's address: --server, or the in-cluster one the kubelet puts in every pod's
// environment (an IPv6 address bracketed, as a URL wants it).
Expected<std::string> server_of(const KubeconfigOptions& o) {
    std::string server = o.server;
    if (server.empty()) {
        const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
        const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
        if (host == nullptr || *host == '\0') {
            return make_error(Code::kInvalidConfig,
                              "no API server: give --server https://HOST:PORT (in a pod, "
                              "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT say it)");
        }
        if (port == nullptr || *port == '\0') {
            return make_error(Code::kInvalidConfig,
                              "KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is "
                              "not: give --server https://HOST:PORT");
        }
        std::string h = host;
        if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";
        server = "https://" + h + ":" + port;
    }
    if (!server.starts_with("https://") && !server.starts_with("http://")) {
        return make_error(Code::kInvalidConfig,
                          "--server " + server + " is not an https:// (or http://) URL");
    }
    for (char c : server) {
        if (c <= ' ' || c == '"' || c == '\\' || c == 0x7f) {
            return make_error(Code::kInvalidConfig,
                              "--server " + server + " has a blank, a quote or a backslash");
        }
    }
    return server;
}

// The service account's files, read now (through the kubelet's symlinks). ca.crt and token
// are needed; namespace, when there, becomes the context's namespace.
Expected<ServiceAccount> read_service_account(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return make_error(Code::kIo,
                          "no service account directory " + dir +
                              " (run in a pod with its service account token mounted, or give "
                              "--service-account-dir DIR holding ca.crt and token)");
    }
    ServiceAccount sa;
    auto ca = read_whole(dir + "/ca.crt");
    if (!ca) {
        return make_error(Code::kIo, "cannot read " + dir + "/ca.crt: " + std::strerror(errno) +
                                         " (the API server's CA certificate, PEM)");
    }
    if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
        return make_error(Code::kInvalidConfig,
                          dir + "/ca.crt is not a PEM certificate (no BEGIN CERTIFICATE line)");
    }
    sa.ca_pem = std::move(*ca);
    auto token = read_whole(dir + "/token");
    if (!token) {
        return make_error(Code::kIo, "cannot read " + dir + "/token: " + std::strerror(errno) +
                                         " (the service account's bearer token)");
    }
    sa.token = trimmed(*token);
    if (sa.token.empty()) return make_error(Code::kInvalidConfig, dir + "/token is empty");
    for (char c : sa.token) {
        if (c <= ' ' || c == '"' || c == '\\' || c == 0x7f) {
            return make_error(Code::kInvalidConfig,
                              dir + "/token is not one token (it has a blank, a quote or a "
                                    "backslash)");
        }
    }
    if (auto ns = read_whole(dir + "/namespace")) sa.namespace_ = trimmed(*ns);
    for (char c : sa.namespace_) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        if (!ok) return make_error(Code::kInvalidConfig, dir + "/namespace is not a namespace");
    }
    return sa;
}

// The kubeconfig's text. Nothing in it changes from one round to the next unless an input
// did, so that comparing texts tells whether to write.
std::string kubeconfig_text(const std::string& server, const ServiceAccount& sa,
                            const std::string& sa_dir) {
    std::string t;
    t += "# Written by shmipamctl kubeconfig from the service account in " + sa_dir + "\n";
    t += "# and rewritten when its token rotates: edits here are lost. shmipam's Kubernetes\n";
    t += "# helper reads it where the ipam config's kubernetes.kubeconfig points.\n";
    t += "apiVersion: v1\n";
    t += "kind: Config\n";
    t += "clusters:\n";
    t += "- name: kubernetes\n";
    t += "  cluster:\n";
    t += "    server: \"" + server + "\"\n";
    t += "    certificate-authority-data: \"" + base::base64_encode(sa.ca_pem) + "\"\n";
    t += "users:\n";
    t += "- name: shmipam\n";
    t += "  user:\n";
    t += "    token: \"" + sa.token + "\"\n";
    t += "contexts:\n";
    t += "- name: shmipam\n";
    t += "  context:\n";
    t += "    cluster: kubernetes\n";
    t += "    user: shmipam\n";
    if (!sa.namespace_.empty()) t += "    namespace: " + sa.namespace_ + "\n";
    t += "current-context: shmipam\n";
    return t;
}

enum class Outcome { kWritten, kUnchanged };

// One round: the service account read, the text made, the file written if it differs.
Expected<Outcome> write_once(const KubeconfigOptions& o, const std::string& server) {
    auto sa = read_service_account(o.service_account_dir);
    if (!sa) return sa.error();
    const std::string text = kubeconfig_text(server, *sa, o.service_account_dir);
    const auto slash = o.out.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : o.out.substr(0, slash);
    const std::string name = o.out.substr(slash == std::string::npos ? 0 : slash + 1);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return make_error(Code::kIo, "cannot create the directory " + dir + " of --out" +
                                         (ec ? ": " + ec.message() : std::string()));
    }
    if (::lstat(o.out.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        if (auto there = read_whole(o.out); there && *there == text) {
            if ((st.st_mode & 07777) != 0600 && ::chmod(o.out.c_str(), 0600) != 0) {
                return make_error(Code::kIo, "cannot chmod " + o.out + ": " + std::strerror(errno));
            }
            return Outcome::kUnchanged;
        }
    }
    if (auto w = replace_file_atomically(dir, name, text, 0600); !w) return w.error();
    return Outcome::kWritten;
}

int cmd_kubeconfig(const KubeconfigOptions& o) {
    if (o.out.empty() || o.out.back() == '/') {
        return cannot_read("kubeconfig needs --out FILE (e.g. "
                           "/host/etc/cni/net.d/shmipam.d/shmipam-kubeconfig)");
    }
    auto server = server_of(o);
    if (!server) return cannot_read(server.error());
    if (o.every_s <= 0) {
        auto r = write_once(o, *server);
        if (!r) return cannot_read(r.error());
        std::cout << (*r == Outcome::kWritten ? "wrote " : "unchanged ") << o.out << "\n";
        return kExitClean;
    }
    // --every: the DaemonSet's long-running container, often its PID 1, which gets no SIGTERM
    // without a handler: stopped at once (a half-written file is a temporary name nobody
    // reads). A round that fails says why and the next one tries again: the service account
    // may come later, a full disk may clear.
    struct sigaction stop {};
    stop.sa_handler = [](int) { ::_exit(0); };
    ::sigaction(SIGTERM, &stop, nullptr);
    ::sigaction(SIGINT, &stop, nullptr);
    bool first = true;
    for (;;) {
        auto r = write_once(o, *server);
        if (!r) {
            std::cerr << "shmipamctl kubeconfig: " << r.error().msg << " (trying again in "
                      << o.every_s << " s)" << std::endl;
        } else if (*r == Outcome::kWritten || first) {
            std::cout << (*r == Outcome::kWritten ? "wrote " : "unchanged ") << o.out
                      << std::endl;
            first = false;
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(o.every_s));
    }
}

}  // namespace

// kubeconfig reads none of the common options: it works on the service account and one file.
void register_kubeconfig(CLI::App& app, CommonOptions&, int& exit_code) {
    auto* verb = app.add_subcommand(
        "kubeconfig",
        "write the kubeconfig through which shmipam's Kubernetes helper reads pods (the ipam "
        "config's kubernetes.kubeconfig) from this pod's service account and the API server's "
        "address: mode 0600, atomically, only when it changes; --every keeps it in step with "
        "the rotated token");
    auto o = std::make_shared<KubeconfigOptions>();
    verb->add_option("--out", o->out,
                     "the kubeconfig to write, e.g. "
                     "/host/etc/cni/net.d/shmipam.d/shmipam-kubeconfig (its directory is "
                     "created)")
        ->required();
    verb->add_option("--service-account-dir", o->service_account_dir,
                     "where ca.crt, token and namespace are")
        ->capture_default_str();
    verb->add_option("--server", o->server,
                     "the API server's URL (default: https://$KUBERNETES_SERVICE_HOST:"
                     "$KUBERNETES_SERVICE_PORT)");
    verb->add_option("--every", o->every_s,
                     "stay running and rewrite it when the token changes, checking every this "
                     "many seconds; a failed round is retried")
        ->check(CLI::PositiveNumber);
    verb->callback([o, &exit_code] { exit_code = cmd_kubeconfig(*o); });
}

}  // namespace shmipam::tools
