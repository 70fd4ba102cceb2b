#include "kube/kubeconfig.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/bounded_read.h"
#include "kube/yaml_json.h"

namespace shmipam::kube {

using nlohmann::json;

namespace {

// A kubeconfig, a certificate or a token is a few kilobytes; a kubeconfig of many clusters a few
// hundred. The bound keeps a helper from reading a device or a huge file named by mistake.
constexpr size_t kMaxFileBytes = 4 << 20;

std::string trimmed(const std::string& s) {
    const char* blanks = " \t\r\n";
    const size_t b = s.find_first_not_of(blanks);
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(blanks) - b + 1);
}

// One kubeconfig being resolved: every error names the file.
struct Resolver {
    std::string path;

    Error bad(const std::string& what) const {
        return make_error(Code::kInvalidConfig, "kubeconfig " + path + ": " + what);
    }

    // A string field of `obj` ("" when absent or null); `where` names the object in messages.
    Expected<std::string> text(const json& obj, const char* field, const std::string& where) const {
        auto it = obj.find(field);
        if (it == obj.end() || it->is_null()) return std::string();
        if (!it->is_string()) return bad(where + "'s " + field + " is not a string");
        return it->get<std::string>();
    }

    // A path from the kubeconfig: relative to its directory, as kubectl resolves it.
    std::string resolve(const std::string& p) const {
        if (p.empty() || p[0] == '/') return p;
        const size_t slash = path.rfind('/');
        return (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/" + p;
    }

    // `field`-data (base64) if set, else the file `field` names; nullopt when neither is.
    Expected<std::optional<std::string>> data_or_file(const json& obj, const std::string& field,
                                                      const std::string& where) const {
        auto data = text(obj, (field + "-data").c_str(), where);
        if (!data) return data.error();
        if (!data->empty()) {
            auto bytes = base::base64_decode_strict(*data);
            if (!bytes) return bad(where + "'s " + field + "-data is not base64");
            return std::optional<std::string>(std::move(*bytes));
        }
        auto file = text(obj, field.c_str(), where);
        if (!file) return file.error();
        if (file->empty()) return std::optional<std::string>();
        const std::string full = resolve(*file);
        auto bytes = base::read_bounded(full, kMaxFileBytes);
        if (!bytes) {
            return bad(where + "'s " + field + " " + full +
                       " cannot be read: " + bytes.error().msg);
        }
        return std::optional<std::string>(std::move(*bytes));
    }

    // The item named `name` of the list `list` ("contexts", "clusters", "users"), its `inner`
    // object ("context", "cluster", "user").
    Expected<json> named(const json& root, const char* list, const char* inner,
                         const std::string& name, const std::string& named_by) const {
        const std::string singular(inner);
        auto items = root.find(list);
        if (items != root.end() && !items->is_null() && !items->is_array()) {
            return bad(std::string(list) + " is not a list");
        }
        if (items != root.end() && items->is_array()) {
            for (const auto& item : *items) {
                if (!item.is_object()) continue;
                auto n = item.find("name");
                if (n == item.end() || !n->is_string() || n->get<std::string>() != name) continue;
                auto body = item.find(inner);
                if (body == item.end() || body->is_null()) return json::object();
                if (!body->is_object()) {
                    return bad(singular + " \"" + name + "\" is not a mapping");
                }
                return *body;
            }
        }
        return bad(singular + " \"" + name + "\" (" + named_by + ") is not in its " + list);
    }

    Status cluster_fields(const json& c, Kubeconfig& out) const {
        const std::string where = "cluster \"" + out.cluster + "\"";
        auto server = text(c, "server", where);
        if (!server) return server.error();
        if (server->empty()) return bad(where + " has no server");
        if (server->rfind("https://", 0) != 0 && server->rfind("http://", 0) != 0) {
            return bad(where + "'s server \"" + *server + "\" is not an https:// (or http://) URL");
        }
        out.server = *server;
        while (out.server.size() > 1 && out.server.back() == '/') out.server.pop_back();
        auto proxy = text(c, "proxy-url", where);
        if (!proxy) return proxy.error();
        // client-go's schemes: an HTTP proxy (CONNECT for https servers), over TLS, or SOCKS5.
        if (!proxy->empty() && !proxy->starts_with("http://") && !proxy->starts_with("https://") &&
            !proxy->starts_with("socks5://")) {
            return bad(where + "'s proxy-url \"" + *proxy +
                       "\" is not an http://, https:// or socks5:// URL");
        }
        out.proxy_url = *proxy;
        auto sni = text(c, "tls-server-name", where);
        if (!sni) return sni.error();
        for (char ch : *sni) {
            const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ||
                            ch == '.' || ch == ':' || ch == '[' || ch == ']';
            if (!ok) return bad(where + "'s tls-server-name \"" + *sni + "\" is not a host name");
        }
        out.tls_server_name = *sni;
        auto ca = data_or_file(c, "certificate-authority", where);
        if (!ca) return ca.error();
        out.ca_pem = std::move(*ca);
        if (auto skip = c.find("insecure-skip-tls-verify"); skip != c.end() && !skip->is_null()) {
            if (!skip->is_boolean()) {
                return bad(where + "'s insecure-skip-tls-verify is not true or false");
            }
            out.verify_tls = !skip->get<bool>();
        }
        // kubectl's rule: trusting a CA and trusting anything contradict each other.
        if (!out.verify_tls && out.ca_pem) {
            return bad(where + " sets both a certificate-authority and insecure-skip-tls-verify");
        }
        return Ok{};
    }

    Status user_fields(const json& u, Kubeconfig& out) const {
        const std::string where = "user \"" + out.user + "\"";
        auto token = text(u, "token", where);
        if (!token) return token.error();
        out.token = *token;
        auto token_file = text(u, "tokenFile", where);
        if (!token_file) return token_file.error();
        // tokenFile wins over token, as in kubectl: it is the one kept fresh (a projected
        // service-account token that the kubelet rotates).
        if (!token_file->empty()) {
            const std::string full = resolve(*token_file);
            auto bytes = base::read_bounded(full, kMaxFileBytes);
            if (!bytes) {
                return bad(where + "'s tokenFile " + full +
                           " cannot be read: " + bytes.error().msg);
            }
            out.token = trimmed(*bytes);
            if (out.token.empty()) return bad(where + "'s tokenFile " + full + " is empty");
        }
        auto cert = data_or_file(u, "client-certificate", where);
        if (!cert) return cert.error();
        auto key = data_or_file(u, "client-key", where);
        if (!key) return key.error();
        if (cert->has_value() != key->has_value()) {
            return bad(where + " has a client-" + (cert->has_value() ? "certificate" : "key") +
                       " without its client-" + (cert->has_value() ? "key" : "certificate"));
        }
        if (*cert) {
            out.client_cert_pem = std::move(**cert);
            out.client_key_pem = std::move(**key);
        }
        if (out.token.empty() && out.client_cert_pem.empty()) {
            for (const char* other : {"exec", "auth-provider", "username", "password"}) {
                if (u.contains(other) && !u[other].is_null()) {
                    return bad(where + " authenticates by " + other +
                               ", which shmipam-kube does not use: give it a token, a tokenFile "
                               "or a client certificate");
                }
            }
        }
        return Ok{};
    }
};

}  // namespace

Expected<Kubeconfig> parse_kubeconfig(std::string_view text, const std::string& path) {
    const Resolver r{path};
    auto root = yaml_to_json(text, "kubeconfig " + path);
    if (!root) return root.error();
    if (!root->is_object()) return r.bad("is not a kubeconfig (not a mapping)");
    Kubeconfig out;
    out.path = path;
    auto current = r.text(*root, "current-context", "the kubeconfig");
    if (!current) return current.error();
    if (current->empty()) return r.bad("has no current-context");
    out.context = *current;
    auto context = r.named(*root, "contexts", "context", out.context, "its current-context");
    if (!context) return context.error();
    const std::string where = "context \"" + out.context + "\"";
    auto cluster = r.text(*context, "cluster", where);
    if (!cluster) return cluster.error();
    if (cluster->empty()) return r.bad(where + " names no cluster");
    out.cluster = *cluster;
    auto user = r.text(*context, "user", where);
    if (!user) return user.error();
    out.user = *user;
    auto c = r.named(*root, "clusters", "cluster", out.cluster, "of " + where);
    if (!c) return c.error();
    if (auto st = r.cluster_fields(*c, out); !st) return st.error();
    // A context without a user is anonymous: the API server decides what it may read.
    if (!out.user.empty()) {
        auto u = r.named(*root, "users", "user", out.user, "of " + where);
        if (!u) return u.error();
        if (auto st = r.user_fields(*u, out); !st) return st.error();
    }
    // A bearer token or a client key over plain HTTP would travel in clear to whoever is on
    // the path; kubectl sends them all the same, the helper does not.
    if (out.server.rfind("http://", 0) == 0 && !(out.token.empty() && out.client_key_pem.empty())) {
        return make_error(Code::kInvalidConfig,
                          "kubeconfig " + path + ": the server " + out.server +
                              " is plain http://, and user " + out.user +
                              " has credentials that would travel in clear: use https://");
    }
    return out;
}

Expected<Kubeconfig> read_kubeconfig(const std::string& path) {
    auto text = base::read_bounded(path, kMaxFileBytes);
    if (!text) {
        return make_error(Code::kInvalidConfig,
                          "kubeconfig " + path + " cannot be read: " + text.error().msg);
    }
    return parse_kubeconfig(*text, path);
}

}  // namespace shmipam::kube
