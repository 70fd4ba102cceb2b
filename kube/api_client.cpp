#include "kube/api_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <thread>

#include "kube/api_status.h"
#include "kube/pod_protocol.h"

namespace shmipam::kube {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// No Kubernetes object is larger than etcd's request limit (1.5 MiB by default); the bound keeps
// a helper that talks to something else from growing without end.
constexpr size_t kMaxBodyBytes = 4 << 20;
// Kubernetes names (DNS subdomains: pods; DNS labels: namespaces) are at most this long.
constexpr size_t kMaxNameBytes = 253;
// A request is sent at most twice: a second refusal or reset is the server's state rather than
// a moment of it, and the runtime retries the whole ADD itself.
constexpr int kAttempts = 2;
// The pause before sending again after a refused or reset connection: an API server restarting
// or a load balancer taking a dead backend out answers again within a fraction of a second,
// and a pause keeps two refusals from coming within the same moment.
constexpr auto kPauseAfterRefusal = std::chrono::milliseconds(100);

// A failure of the connection itself, before any answer: the server refused it (a restart), or
// reset or closed it before answering (a load balancer's backend going away).
bool refused_or_reset(CURLcode rc) {
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR ||
           rc == CURLE_GOT_NOTHING;
}

// The delay-seconds form of a Retry-After header ("120"); nullopt for none or its HTTP-date
// form, which no API server sends (it writes seconds: its priority and fairness filter, and
// 5xx from an apiserver that is starting).
std::optional<uint64_t> retry_after_seconds(CURL* c) {
    curl_header* h = nullptr;
    if (curl_easy_header(c, "Retry-After", 0, CURLH_HEADER, -1, &h) != CURLHE_OK) {
        return std::nullopt;
    }
    const std::string value = h->value;
    if (value.empty() || value.size() > 9 ||
        value.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return std::stoull(value);
}

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

// 11 for an API server that gave no usable answer (protocol::kApiUnavailableDetails).
Error unavailable(const std::string& msg) {
    return Error{Code::kTryAgainLater, msg, protocol::kApiUnavailableDetails};
}

// What a message about a 429 or 5xx adds: that it came again on the retry, or why there was
// none (its Retry-After is past the budget); "" for an answer that asked for no retry.
std::string retried(const Response& r) {
    if (r.attempts > 1) return " (sent " + std::to_string(r.attempts) + " times)";
    if (r.retry_after_s) {
        return " (its Retry-After of " + std::to_string(*r.retry_after_s) +
               " s is past what is left of the budget)";
    }
    return "";
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

Resource virtualmachine_resource(const std::string& ns, const std::string& name) {
    return Resource{"kubevirt.io", "v1", "virtualmachines", ns, name};
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

ApiClient::ApiClient(Kubeconfig cfg, std::chrono::milliseconds budget,
                     std::chrono::milliseconds connect_timeout)
    : cfg_(std::move(cfg)),
      budget_(budget),
      connect_timeout_(connect_timeout),
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
    // The kubeconfig's proxy-url, else none, whatever the environment says: the helper inherits
    // the container runtime's environment through the plugin, where HTTPS_PROXY is often set
    // for image pulls (and its NO_PROXY written for Go, whose CIDR entries this libcurl reads
    // otherwise). Without proxy-url the API server is reached directly, as the kubelet on the
    // node reaches it.
    curl_easy_setopt(c, CURLOPT_PROXY, cfg_.proxy_url.c_str());
    curl_easy_setopt(c, CURLOPT_NOPROXY, cfg_.proxy_url.empty() ? "*" : "");
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

// One attempt's outcome, and whether (and after how long) the request may be sent again.
struct ApiClient::Attempt {
    Expected<Response> answer;
    std::optional<std::chrono::milliseconds> again_after;
};

Expected<Response> ApiClient::send(const char* method, const std::string& path,
                                   const std::string* body_out) {
    for (int attempt = 1;; ++attempt) {
        Attempt a = send_once(method, path, body_out);
        if (!a.again_after || attempt == kAttempts) {
            if (attempt > 1 && !a.answer) {
                Error e = a.answer.error();
                e.msg += " (sent " + std::to_string(attempt) + " times)";
                return e;
            }
            if (a.answer) a.answer->attempts = attempt;
            return std::move(a.answer);
        }
        std::this_thread::sleep_for(*a.again_after);
    }
}

ApiClient::Attempt ApiClient::send_once(const char* method, const std::string& path,
                                        const std::string* body_out) {
    const std::string target = url(path);
    const std::string get = std::string(method) + " " + target + ": ";
    if (impl_->curl == nullptr) {
        return {make_error(Code::kInternal, get + "cannot start libcurl"), std::nullopt};
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    // A timeout of 0 would mean none at all.
    if (left < 1) {
        return {unavailable(get + "the budget of " + std::to_string(budget_.count()) +
                            " ms was spent before it"),
                std::nullopt};
    }
    const long connect_limit = std::min<long>(left, long(connect_timeout_.count()));
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
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_limit);
    const auto started = Clock::now();
    const CURLcode rc = curl_easy_perform(c);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    // What is left of the budget for a second attempt after a pause of `pause`: none when the
    // pause alone would spend it.
    auto again_after =
        [&](std::chrono::milliseconds pause) -> std::optional<std::chrono::milliseconds> {
        if (deadline_ - Clock::now() <= pause) return std::nullopt;
        return pause;
    };
    if (rc != CURLE_OK) {
        const std::string why =
            std::string(curl_easy_strerror(rc)) +
            (impl_->error[0] != '\0' ? std::string(" (") + impl_->error + ")" : "");
        if (body.too_large) {
            return {make_error(Code::kInternal, get + "the answer is larger than " +
                                                    std::to_string(kMaxBodyBytes) +
                                                    " bytes, which no Kubernetes object is"),
                    std::nullopt};
        }
        if (tls_misconfiguration(rc)) {
            const bool ours = rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_ENGINE_NOTFOUND ||
                              rc == CURLE_SSL_ENGINE_SETFAILED || rc == CURLE_SSL_ENGINE_INITFAILED;
            return {make_error(
                        Code::kInvalidConfig,
                        get + "TLS failed: " + why + " (kubeconfig " + cfg_.path + ": " +
                            (ours ? "user \"" + cfg_.user + "\"'s client-certificate and client-key"
                                  : "cluster \"" + cfg_.cluster +
                                        "\"'s certificate-authority does not verify the "
                                        "server's certificate for " +
                                        cfg_.server) +
                            ")"),
                    std::nullopt};
        }
        if (rc == CURLE_OPERATION_TIMEDOUT) {
            // When the TCP and TLS handshakes completed (0: never, on this attempt's connection).
            curl_off_t app_connect = 0;
            curl_easy_getinfo(c, CURLINFO_APPCONNECT_TIME_T, &app_connect);
            curl_off_t tcp_connect = 0;
            curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &tcp_connect);
            const bool https = requested.starts_with("https://");
            const bool no_connection = tcp_connect == 0 || (https && app_connect == 0);
            if (no_connection && connect_limit < left && took < left) {
                return {unavailable(get + "no connection within the connect timeout of " +
                                    std::to_string(connect_limit) + " ms: " + why),
                        std::nullopt};
            }
            return {unavailable(get + "no answer within the budget of " +
                                std::to_string(budget_.count()) + " ms: " + why),
                    std::nullopt};
        }
        if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
            return {make_error(Code::kInvalidConfig,
                               get + why + " (kubeconfig " + cfg_.path + "'s server)"),
                    std::nullopt};
        }
        const std::string through = cfg_.proxy_url.empty()
                                        ? ""
                                        : " through the proxy " + cfg_.proxy_url + " (kubeconfig " +
                                              cfg_.path + "'s proxy-url)";
        return {unavailable(get + "the API server is unreachable" + through + ": " + why),
                refused_or_reset(rc) ? again_after(kPauseAfterRefusal) : std::nullopt};
    }
    Response answer;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer.status);
    answer.body = std::move(body.text);
    std::optional<std::chrono::milliseconds> again;
    if (answer.status == 429 || answer.status >= 500) {
        answer.retry_after_s = retry_after_seconds(c);
        if (answer.retry_after_s) {
            // A Retry-After of 0 still gets the pause a refusal gets.
            again = again_after(std::max<std::chrono::milliseconds>(
                std::chrono::seconds(*answer.retry_after_s), kPauseAfterRefusal));
        }
    }
    return {std::move(answer), again};
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
                return unavailable(get + "the answer is not a JSON object: " + said);
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
            return unavailable(get + said);
        case 429:
            return unavailable(get + said + retried(*answer));
        default:
            if (answer->status >= 500) return unavailable(get + said + retried(*answer));
            return make_error(Code::kInternal,
                              get + "an answer the helper does not expect: " + said);
    }
}

}  // namespace shmipam::kube
