// shmipamctl kubeconfig: the kubeconfig through which the plugin's Kubernetes helper
// (shmipam-kube) reads pod facts from the API server, written for the host, as Calico's CNI
// installer writes calico-kubeconfig: one cluster (the API server's address and its CA,
// inline), one user (a token, inline), one context, current. The token is one of the pod's
// service account from TokenRequest, bound to no pod, renewed at about a quarter of its life
// (kubeconfig_token.h), so that the node keeps a working kubeconfig when this pod goes (a
// projected token dies with its pod); where TokenRequest is refused, the pod's projected token,
// said so. Written atomically (a reader sees the old file or the new one whole, also after a
// crash) with mode 0600, and only when its content changes (an unchanged kubeconfig keeps its
// inode). With --every it stays running: each round reads the service account's files anew
// (the kubelet swaps the volume's `..data` symlink) and compares content, never mtimes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "base/base64.h"
#include "ipam/helper_exec.h"
#include "kube/pod_protocol.h"
#include "kube/token_request.h"
#include "tools/verbs/kubeconfig_token.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

constexpr const char* kDefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

// A token asked from TokenRequest lives this long unless --token-lifetime says otherwise (as
// Calico's node agent asks for its CNI kubeconfig).
constexpr int64_t kDefaultTokenLifetimeS = 24 * 3600;
// One TokenRequest (through the helper) may take this long, connection included; no pod waits
// for it, so its connection may take all of it.
constexpr uint64_t kTokenRequestBudgetMs = 10'000;
// After TokenRequest failed, it is asked again no sooner than this (the projected token is
// written meanwhile): a role that lacks the verb must not cost the API server a request per
// node and round.
constexpr int64_t kTokenRetryAfterFailureS = 600;
// A requested token kept on disk through TokenRequest failures is replaced by the projected one
// once it has less than this left.
constexpr int64_t kShortestLifeKeptS = 300;

struct KubeconfigOptions {
    std::string service_account_dir = kDefaultServiceAccountDir;
    std::string server;  // default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
    std::string out;
    double every_s = 0;  // run again this often until stopped (the DaemonSet's container)
    int64_t token_lifetime_s = kDefaultTokenLifetimeS;  // 0: the projected token as it is
    std::string service_account;  // NAMESPACE/NAME; default: the projected token's subject
    std::string helper;           // default: shmipam-kube beside shmipamctl
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
                              dir +
                                  "/token is not one token (it has a blank, a quote or a "
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

// The user's token in a kubeconfig this verb wrote ("" when there is none).
std::string token_in(const std::string& text) {
    constexpr std::string_view kTokenLine = "    token: \"";
    const size_t at = text.find(kTokenLine);
    if (at == std::string::npos) return "";
    const size_t start = at + kTokenLine.size();
    const size_t end = text.find('"', start);
    return end == std::string::npos ? "" : text.substr(start, end - start);
}

// The kubeconfig's text, with `token` as the user's. Nothing in it changes from one round to
// the next unless an input did, so that comparing texts tells whether to write.
std::string kubeconfig_text(const std::string& server, const ServiceAccount& sa,
                            const std::string& sa_dir, const std::string& token,
                            const TokenState& state) {
    std::string t;
    t += "# Written by shmipamctl kubeconfig from the service account in " + sa_dir + "\n";
    t += "# and rewritten when its token rotates: edits here are lost. shmipam's Kubernetes\n";
    t += "# helper reads it where the ipam config's kubernetes.kubeconfig points.\n";
    t += token_state_line(state);
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
    t += "    token: \"" + token + "\"\n";
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

struct Round {
    Outcome outcome = Outcome::kUnchanged;
    std::string note;  // what token it holds, or why not the one asked for
};

// The out file's directory and name.
std::pair<std::string, std::string> split_out(const std::string& out) {
    const auto slash = out.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : out.substr(0, slash);
    return {dir, out.substr(slash == std::string::npos ? 0 : slash + 1)};
}

std::string helper_of(const KubeconfigOptions& o) {
    return o.helper.empty() ? ipam::helper_beside_plugin("shmipam-kube") : o.helper;
}

std::string utc(int64_t unix) {
    char text[32] = {};
    const time_t t = time_t(unix);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

// A token of the service account from TokenRequest, asked through the Kubernetes helper with a
// kubeconfig of the projected token (written beside the out file for the helper's run, mode
// 0600, removed after).
Expected<kube::protocol::TokenAnswer> request_token(const KubeconfigOptions& o,
                                                    const std::string& server,
                                                    const ServiceAccount& sa) {
    std::pair<std::string, std::string> who;
    if (!o.service_account.empty()) {
        const size_t slash = o.service_account.find('/');
        if (slash == std::string::npos) {
            return make_error(Code::kInvalidConfig,
                              "--service-account " + o.service_account + " is not NAMESPACE/NAME");
        }
        who = {o.service_account.substr(0, slash), o.service_account.substr(slash + 1)};
    } else {
        auto of = service_account_of(sa.token);
        if (!of) return of.error();
        who = *of;
    }
    const auto [dir, name] = split_out(o.out);
    const std::string asking = "." + name + ".projected." + std::to_string(::getpid());
    const std::string text = kubeconfig_text(server, sa, o.service_account_dir, sa.token, {});
    if (auto w = replace_file_atomically(dir, asking, text, 0600); !w) return w.error();
    namespace protocol = kube::protocol;
    const protocol::RequestToken ask{
        {dir + "/" + asking, kTokenRequestBudgetMs, kTokenRequestBudgetMs},
        who.first,
        who.second,
        o.token_lifetime_s};
    auto out = ipam::run_helper(helper_of(o), protocol::encode(ask), -1, "--helper");
    ::unlink((dir + "/" + asking).c_str());
    if (!out) return out.error();
    return protocol::token_answer(*out);
}

// The token this round writes, and its state: the one on disk while it is not due for renewal;
// else a new one from TokenRequest, unless the one on disk outlives it; on a TokenRequest
// failure, the one on disk while it has life left, else the projected token.
std::pair<std::string, TokenState> choose_token(const KubeconfigOptions& o,
                                                const std::string& server, const ServiceAccount& sa,
                                                const std::string& on_disk, std::string& note) {
    using Source = TokenState::Source;
    if (o.token_lifetime_s == 0) {
        note = "the pod's projected token (--token-lifetime 0)";
        return {sa.token, {}};
    }
    const int64_t now = ::time(nullptr);
    const TokenState disk = read_token_state(on_disk);
    const std::string disk_token = token_in(on_disk);
    // The same cluster: the file is what this round would write with its token and state.
    const bool same_cluster =
        !disk_token.empty() &&
        on_disk == kubeconfig_text(server, sa, o.service_account_dir, disk_token, disk);
    const bool disk_requested = same_cluster && disk.source == Source::kRequested;
    if (disk_requested && now < disk.next && now < disk.expires) {
        note = "a requested token, valid until " + utc(disk.expires);
        return {disk_token, disk};
    }
    if (same_cluster && disk.source == Source::kProjected && now < disk.next &&
        disk_token == sa.token) {
        note = "the pod's projected token; TokenRequest is asked again at " + utc(disk.next);
        return {sa.token, disk};
    }
    auto issued = request_token(o, server, sa);
    if (issued) {
        if (disk_requested && disk.expires > issued->expires_at) {
            // Never a token older than the one on disk (another writer's, asked for longer).
            note = "the requested token on disk, valid until " + utc(disk.expires) +
                   ", outlives the one just issued";
            return {disk_token, {Source::kRequested, disk.expires, renew_time(now, disk.expires)}};
        }
        note = "a requested token, valid until " + utc(issued->expires_at);
        return {issued->token,
                {Source::kRequested, issued->expires_at, renew_time(now, issued->expires_at)}};
    }
    const std::string why = issued.error().msg;
    if (disk_requested && disk.expires - now > kShortestLifeKeptS) {
        note = "the requested token on disk, valid until " + utc(disk.expires) +
               " (TokenRequest failed: " + why + ")";
        const int64_t retry =
            std::min(now + kTokenRetryAfterFailureS, renew_time(now, disk.expires));
        return {disk_token, {Source::kRequested, disk.expires, retry}};
    }
    note = "the pod's projected token, which dies with the pod (TokenRequest failed: " + why + ")";
    return {sa.token, {Source::kProjected, 0, now + kTokenRetryAfterFailureS}};
}

// One round: the service account read, the token chosen, the text made, the file written if
// it differs.
Expected<Round> write_once(const KubeconfigOptions& o, const std::string& server) {
    auto sa = read_service_account(o.service_account_dir);
    if (!sa) return sa.error();
    const auto [dir, name] = split_out(o.out);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return make_error(Code::kIo, "cannot create the directory " + dir + " of --out" +
                                         (ec ? ": " + ec.message() : std::string()));
    }
    const bool regular = ::lstat(o.out.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    const std::string on_disk = regular ? read_whole(o.out).value_or("") : "";
    Round round;
    const auto [token, state] = choose_token(o, server, *sa, on_disk, round.note);
    const std::string text = kubeconfig_text(server, *sa, o.service_account_dir, token, state);
    if (regular && on_disk == text) {
        if ((st.st_mode & 07777) != 0600 && ::chmod(o.out.c_str(), 0600) != 0) {
            return make_error(Code::kIo, "cannot chmod " + o.out + ": " + std::strerror(errno));
        }
        return round;
    }
    if (auto w = replace_file_atomically(dir, name, text, 0600); !w) return w.error();
    round.outcome = Outcome::kWritten;
    return round;
}

int cmd_kubeconfig(const KubeconfigOptions& o) {
    if (o.out.empty() || o.out.back() == '/') {
        return cannot_read(
            "kubeconfig needs --out FILE (e.g. "
            "/host/etc/cni/net.d/shmipam.d/shmipam-kubeconfig)");
    }
    auto server = server_of(o);
    if (!server) return cannot_read(server.error());
    if (o.token_lifetime_s != 0 && o.token_lifetime_s < kube::kShortestTokenSeconds) {
        return cannot_read("--token-lifetime " + std::to_string(o.token_lifetime_s) +
                           " is shorter than the API server grants (" +
                           std::to_string(kube::kShortestTokenSeconds) +
                           " s); 0 writes the pod's projected token as it is");
    }
    if (o.every_s <= 0) {
        auto r = write_once(o, *server);
        if (!r) return cannot_read(r.error());
        std::cout << (r->outcome == Outcome::kWritten ? "wrote " : "unchanged ") << o.out << " ("
                  << r->note << ")\n";
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
        } else if (r->outcome == Outcome::kWritten || first) {
            std::cout << (r->outcome == Outcome::kWritten ? "wrote " : "unchanged ") << o.out
                      << " (" << r->note << ")" << std::endl;
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
    verb->add_option("--token-lifetime", o->token_lifetime_s,
                     "the lifetime in seconds of the token asked from TokenRequest for the "
                     "service account (bound to no pod, renewed at about a quarter of it); 0: "
                     "write the pod's projected token, which dies with the pod")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    verb->add_option("--service-account", o->service_account,
                     "NAMESPACE/NAME of the service account to ask a token of (default: the "
                     "projected token's subject)");
    verb->add_option("--helper", o->helper,
                     "the Kubernetes helper that asks TokenRequest (default: shmipam-kube "
                     "beside shmipamctl)");
    verb->add_option("--every", o->every_s,
                     "stay running and rewrite it when the token changes, checking every this "
                     "many seconds; a failed round is retried")
        ->check(CLI::PositiveNumber);
    verb->callback([o, &exit_code] { exit_code = cmd_kubeconfig(*o); });
}

}  // namespace shmipam::tools
