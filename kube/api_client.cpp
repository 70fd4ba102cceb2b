#include "kube/api_client.h"

#include <curl/curl.h>

#include "kube/api_status.h"

namespace shmipam::kube {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// No Kubernetes object is larger than etcd's request limit (1.5 MiB by default); the bound keeps
// a helper that talks to something else from growing without end.
constexpr size_t kMaxBodyBytes = 4 << 20;
// Kubernetes names (DNS subdomains: pods; DNS labels: namespaces) are at most this long.
constexpr size_t kMaxNameBytes = 253;

struct Body {
    std::string text;
    bool too_large = false;
};

size_t collect(char* data, size_t size, size_t n, void* out) {
    auto* body = static_cast<Body*>(out);
    if (body->text.size() + size * n > kMaxBodyBytes) {
        body->too_large = true;
        return 0;  // libcurl stops with CURLE_WRITE_ERROR
    }
    body->text.append(data, size * n);
    return size * n;
}

// A name that goes into a URL path as it is: a DNS subdomain's characters only, so that no name
// can reach another path ("..", "/", "?").
bool kubernetes_name(const std::string& s) {
    if (s.empty() || s.size() > kMaxNameBytes || s == "." || s == "..") return false;
    for (char c : s) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
            return false;
        }
    }
    return true;
}

// A TLS failure that a retry cannot mend: the server's certificate does not verify against the
// kubeconfig's CA (or the system's), or the client's own certificate or key is unusable.
bool tls_misconfiguration(CURLcode rc) {
    switch (rc) {
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_ENGINE_INITFAILED:
            return true;
        default:
            return false;
    }
}

void set_blob(CURL* c, CURLoption option, const std::string& bytes) {
    curl_blob blob{const_cast<char*>(bytes.data()), bytes.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, option, &blob);
}

}  // namespace

std::string Resource::path() const {
    const std::string base = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
    return base + "/namespaces/" + namespace_ + "/" + plural + "/" + name;
}

std::string Resource::what() const {
    return group.empty() ? plural : plural + "." + group;
}

Resource pod_resource(const std::string& ns, const std::string& name) {
    return Resource{"", "v1", "pods", ns, name};
}

Resource statefulset_resource(const std::string& ns, const std::string& name) {
    return Resource{"apps", "v1", "statefulsets", ns, name};
}

// The host and port of a server URL ("https://HOST[:PORT][/...]", HOST an IPv6 address in
// brackets), the port defaulting to the scheme's.
std::pair<std::string, std::string> host_and_port(const std::string& server) {
    const size_t scheme = server.find("://");
    std::string rest = scheme == std::string::npos ? server : server.substr(scheme + 3);
    rest = rest.substr(0, rest.find('/'));
    std::string host = rest, port = server.starts_with("http://") ? "80" : "443";
    const size_t colon = rest.rfind(':');
    const size_t bracket = rest.rfind(']');
    if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
    }
    return {host, port};
}

struct ApiClient::Impl {
    CURL* curl = nullptr;
    curl_slist* headers = nullptr;
    curl_slist* connect_to = nullptr;
    char error[CURL_ERROR_SIZE] = {};
    ~Impl() {
        curl_slist_free_all(connect_to);
        curl_slist_free_all(headers);
        if (curl != nullptr) curl_easy_cleanup(curl);
    }
};

ApiClient::ApiClient(Kubeconfig cfg, std::chrono::milliseconds budget)
    : cfg_(std::move(cfg)),
      budget_(budget),
      deadline_(Clock::now() + budget),
      impl_(std::make_unique<Impl>()) {
    // One client per process (the helper's run): the global init is done here, once.
    static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (global != CURLE_OK) return;
    CURL* c = impl_->curl = curl_easy_init();
    if (c == nullptr) return;
    impl_->headers = curl_slist_append(impl_->headers, "Accept: application/json");
    impl_->headers = curl_slist_append(impl_->headers, "Content-Type: application/json");
    if (!cfg_.token.empty()) {
        impl_->headers =
            curl_slist_append(impl_->headers, ("Authorization: Bearer " + cfg_.token).c_str());
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, impl_->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "shmipam-kube");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, impl_->error);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
    // No proxy, whatever the environment says: the helper inherits the container runtime's
    // environment through the plugin, where HTTPS_PROXY is often set for image pulls (and its
    // NO_PROXY written for Go, whose CIDR entries this libcurl reads otherwise). The API server
    // is reached directly, as the kubelet on the node reaches it; a kubeconfig's proxy-url is
    // refused (kube/kubeconfig.cpp).
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (cfg_.ca_pem) {
        set_blob(c, CURLOPT_CAINFO_BLOB, *cfg_.ca_pem);
        // The kubeconfig's CA alone, as kubectl trusts it: not the system's CAs beside it.
        curl_easy_setopt(c, CURLOPT_CAINFO, nullptr);
        curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
    }
    if (!cfg_.verify_tls) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    // tls-server-name: the request names that host (so TLS sends it as SNI and checks the
    // certificate against it), and CONNECT_TO sends the connection to the server's own host.
    if (!cfg_.tls_server_name.empty()) {
        const auto [host, port] = host_and_port(cfg_.server);
        impl_->connect_to = curl_slist_append(
            impl_->connect_to,
            (cfg_.tls_server_name + ":" + port + ":" + host + ":" + port).c_str());
        curl_easy_setopt(c, CURLOPT_CONNECT_TO, impl_->connect_to);
        const size_t scheme = cfg_.server.find("://") + 3;
        request_base_ = cfg_.server.substr(0, scheme) + cfg_.tls_server_name + ":" + port +
                        cfg_.server.substr(cfg_.server.find('/', scheme) == std::string::npos
                                               ? cfg_.server.size()
                                               : cfg_.server.find('/', scheme));
    }
    if (!cfg_.client_cert_pem.empty()) {
        set_blob(c, CURLOPT_SSLCERT_BLOB, cfg_.client_cert_pem);
        curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        set_blob(c, CURLOPT_SSLKEY_BLOB, cfg_.client_key_pem);
        curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
}

ApiClient::~ApiClient() = default;

Expected<Response> ApiClient::get(const std::string& path) {
    return send("GET", path, nullptr);
}

Expected<Response> ApiClient::post(const std::string& path, const std::string& body) {
    return send("POST", path, &body);
}

Expected<Response> ApiClient::send(const char* method, const std::string& path,
                                   const std::string* body_out) {
    const std::string target = url(path);
    const std::string get = std::string(method) + " " + target + ": ";
    if (impl_->curl == nullptr) return make_error(Code::kInternal, get + "cannot start libcurl");
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    // A timeout of 0 would mean none at all.
    if (left < 1) {
        return make_error(
            Code::kTryAgainLater,
            get + "the budget of " + std::to_string(budget_.count()) + " ms was spent before it");
    }
    CURL* c = impl_->curl;
    Body body;
    impl_->error[0] = '\0';
    const std::string requested = (request_base_.empty() ? cfg_.server : request_base_) + path;
    curl_easy_setopt(c, CURLOPT_URL, requested.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    if (body_out != nullptr) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body_out->c_str());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body_out->size()));
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(left));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(left));
    const CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        const std::string why =
            std::string(curl_easy_strerror(rc)) +
            (impl_->error[0] != '\0' ? std::string(" (") + impl_->error + ")" : "");
        if (body.too_large) {
            return make_error(Code::kInternal, get + "the answer is larger than " +
                                                   std::to_string(kMaxBodyBytes) +
                                                   " bytes, which no Kubernetes object is");
        }
        if (tls_misconfiguration(rc)) {
            const bool ours = rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_ENGINE_NOTFOUND ||
                              rc == CURLE_SSL_ENGINE_SETFAILED || rc == CURLE_SSL_ENGINE_INITFAILED;
            return make_error(
                Code::kInvalidConfig,
                get + "TLS failed: " + why + " (kubeconfig " + cfg_.path + ": " +
                    (ours ? "user \"" + cfg_.user + "\"'s client-certificate and client-key"
                          : "cluster \"" + cfg_.cluster +
                                "\"'s certificate-authority does not verify the server's "
                                "certificate for " +
                                cfg_.server) +
                    ")");
        }
        if (rc == CURLE_OPERATION_TIMEDOUT) {
            return make_error(Code::kTryAgainLater, get + "no answer within the budget of " +
                                                        std::to_string(budget_.count()) +
                                                        " ms: " + why);
        }
        if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
            return make_error(Code::kInvalidConfig,
                              get + why + " (kubeconfig " + cfg_.path + "'s server)");
        }
        return make_error(Code::kTryAgainLater, get + "the API server is unreachable: " + why);
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return Response{status, std::move(body.text)};
}

Expected<std::optional<json>> ApiClient::get_object(const Resource& r) {
    const std::string target = url(r.path());
    if (!kubernetes_name(r.namespace_) || !kubernetes_name(r.name)) {
        return make_error(Code::kInvalidConfig, "GET " + target + ": \"" + r.namespace_ + "/" +
                                                    r.name + "\" is not a Kubernetes name");
    }
    auto answer = get(r.path());
    if (!answer) return answer.error();
    const std::string get = "GET " + target + ": ";
    const std::string said = describe_answer(answer->status, answer->body);
    const std::string who = "kubeconfig " + cfg_.path + " (user \"" + cfg_.user + "\")";
    const std::string verb = "get " + r.what() + " in namespace " + r.namespace_;
    switch (answer->status) {
        case 200: {
            json j = json::parse(answer->body, nullptr, false);
            if (j.is_discarded() || !j.is_object()) {
                // A proxy's or a load balancer's page in front of an API server that is away.
                return make_error(Code::kTryAgainLater,
                                  get + "the answer is not a JSON object: " + said);
            }
            return std::optional<json>(std::move(j));
        }
        case 401:
            return make_error(Code::kInvalidConfig,
                              get + "the API server does not accept the credentials of " + who +
                                  " to " + verb + ": " + said);
        case 403:
            return make_error(Code::kInvalidConfig,
                              get + "the API server forbids " + who + " to " + verb + ": " + said);
        case 404: {
            // Not there only when the API server says so of this object: a 404 of something
            // else (a server URL that is not the API server, an API group not served yet) must
            // never read as "the StatefulSet is gone".
            auto s = decode_status(answer->body);
            if (s && s->reason == "NotFound" &&
                (s->details_name.empty() || s->details_name == r.name)) {
                return std::optional<json>();
            }
            return make_error(Code::kTryAgainLater,
                              get + "404 without the API server's NotFound status of " + r.name +
                                  " (is " + cfg_.server + " the API server?): " + said);
        }
        case 408:
        case 429:
            return make_error(Code::kTryAgainLater, get + said);
        default:
            if (answer->status >= 500) return make_error(Code::kTryAgainLater, get + said);
            return make_error(Code::kInternal,
                              get + "an answer the helper does not expect: " + said);
    }
}

}  // namespace shmipam::kube
