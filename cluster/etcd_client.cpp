#include "cluster/etcd_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/base64.h"

namespace shmipam::cluster {

using nlohmann::json;

namespace {

std::once_flag curl_global;

size_t collect(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

// The gateway writes 64-bit integers as strings.
int64_t int_of(const json& j, const char* field) {
    auto it = j.find(field);
    if (it == j.end()) return 0;
    if (it->is_string()) return std::strtoll(it->get<std::string>().c_str(), nullptr, 10);
    if (it->is_number_integer()) return it->get<int64_t>();
    return 0;
}

uint64_t uint_of(const json& j, const char* field) {
    auto it = j.find(field);
    if (it == j.end()) return 0;
    if (it->is_string()) return std::strtoull(it->get<std::string>().c_str(), nullptr, 10);
    if (it->is_number_unsigned()) return it->get<uint64_t>();
    return 0;
}

KeyValue kv_of(const json& j) {
    KeyValue kv;
    kv.key = base::base64_decode(j.value("key", ""));
    kv.value = base::base64_decode(j.value("value", ""));
    kv.create_revision = int_of(j, "create_revision");
    kv.mod_revision = int_of(j, "mod_revision");
    kv.version = int_of(j, "version");
    return kv;
}

}  // namespace

struct EtcdClient::Impl {
    CURL* curl = nullptr;
};

EtcdClient::EtcdClient(EtcdConfig cfg) : cfg_(std::move(cfg)), impl_(std::make_unique<Impl>()) {
    std::call_once(curl_global, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    impl_->curl = curl_easy_init();
}

EtcdClient::~EtcdClient() {
    if (impl_->curl != nullptr) curl_easy_cleanup(impl_->curl);
}

namespace {
constexpr const char* kAuthenticate = "/v3/auth/authenticate";
}

Expected<std::string> EtcdClient::call(const std::string& path, const std::string& body) {
    if (cfg_.endpoints.empty()) return make_error(Code::kInvalidConfig, "etcd: no endpoints");
    using Clock = std::chrono::steady_clock;
    // One budget for the call, the authentication it needs included (a nested call for the
    // token shares the outer call's deadline).
    const bool outer = !in_call_;
    if (outer) {
        deadline_ = Clock::now() + std::chrono::milliseconds(cfg_.budget_ms);
        in_call_ = true;
    }
    struct EndOfCall {
        bool outer;
        bool& in_call;
        ~EndOfCall() {
            if (outer) in_call = false;
        }
    } end_of_call{outer, in_call_};
    const auto deadline = deadline_;
    const bool authenticating = path == kAuthenticate;
    if (!cfg_.username.empty() && token_.empty() && !authenticating) {
        if (auto st = authenticate(); !st) return st.error();
    }
    bool renewed = false;
    if (impl_->curl == nullptr)
        return make_error(Code::kInternal, "etcd: cannot initialise libcurl");
    std::string why;
    size_t tls_failures = 0;
    for (size_t attempt = 0; Clock::now() < deadline; ++attempt) {
        const size_t e = (preferred_ + attempt) % cfg_.endpoints.size();
        // After a pass over every endpoint, a pause: members that refuse at once (down, starting)
        // are not hammered for the whole budget.
        if (attempt > 0 && attempt % cfg_.endpoints.size() == 0) {
            if (tls_failures == cfg_.endpoints.size()) {
                return make_error(Code::kUnavailable, "etcd: TLS failed on every endpoint: " + why);
            }
            tls_failures = 0;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left < 1) break;  // a timeout of 0 would mean none at all
        CURL* c = impl_->curl;
        curl_easy_reset(c);
        const std::string url = cfg_.endpoints[e] + path;
        std::string out;
        curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
        if (!token_.empty()) {
            headers = curl_slist_append(headers, ("Authorization: " + token_).c_str());
        }
        curl_easy_setopt(c, CURLOPT_URL, url.c_str());
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body.size()));
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                         long(std::min<int64_t>(int64_t(cfg_.attempt_timeout_ms), left)));
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                         long(std::min<int64_t>(int64_t(cfg_.attempt_timeout_ms), left)));
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        if (!cfg_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, cfg_.ca_file.c_str());
        if (!cfg_.cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, cfg_.cert_file.c_str());
        if (!cfg_.key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, cfg_.key_file.c_str());
        const CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(headers);
        if (rc != CURLE_OK) {
            why = cfg_.endpoints[e] + ": " + curl_easy_strerror(rc);
            // One member with a bad certificate must not break the others: try them, and fail
            // at once only when every endpoint failed TLS.
            if (rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_PEER_FAILED_VERIFICATION ||
                rc == CURLE_SSL_CERTPROBLEM) {
                ++tls_failures;
                why = "TLS failed: " + why;
                if (tls_failures == cfg_.endpoints.size()) {
                    return make_error(Code::kUnavailable, "etcd: " + why);
                }
            }
            continue;
        }
        if (status == 401 && !cfg_.username.empty() && !authenticating && !renewed) {
            // The token expired (etcd's simple tokens live 5 minutes by default): once more.
            renewed = true;
            if (auto st = authenticate(); !st) return st.error();
            continue;
        }
        if (status != 200) {
            why = cfg_.endpoints[e] + ": HTTP " + std::to_string(status) + ": " + out;
            if (status >= 500) continue;  // a member without a leader, or shutting down
            return make_error(Code::kUnavailable, "etcd refused the request: " + why);
        }
        preferred_ = e;
        return out;
    }
    return make_error(
        Code::kUnavailable,
        "etcd unavailable: no endpoint answered within " + std::to_string(cfg_.budget_ms) + " ms",
        why);
}

namespace {

Expected<json> parsed(const Expected<std::string>& text, ResponseHeader& header) {
    if (!text) return text.error();
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(Code::kUnavailable, "etcd answered something that is not JSON");
    }
    if (auto h = j.find("header"); h != j.end() && h->is_object()) {
        header.cluster_id = uint_of(*h, "cluster_id");
        header.member_id = uint_of(*h, "member_id");
        header.revision = int_of(*h, "revision");
        header.highest_revision = std::max(header.highest_revision, header.revision);
    }
    return j;
}

}  // namespace

::shmipam::Status EtcdClient::authenticate() {
    token_.clear();
    auto j = parsed(
        call(kAuthenticate, json{{"name", cfg_.username}, {"password", cfg_.password}}.dump()),
        header_);
    if (!j) {
        Error e = j.error();
        e.msg = "etcd: cannot authenticate as " + cfg_.username + ": " + e.msg;
        return e;
    }
    token_ = j->value("token", "");
    if (token_.empty()) {
        return make_error(Code::kUnavailable, "etcd: authentication as " + cfg_.username +
                                                  " gave no token (is auth enabled in etcd?)");
    }
    return Ok{};
}

Expected<std::optional<KeyValue>> EtcdClient::get(const std::string& key) {
    auto j = parsed(call("/v3/kv/range", json{{"key", base::base64_encode(key)}}.dump()), header_);
    if (!j) return j.error();
    if (auto kvs = j->find("kvs"); kvs != j->end() && kvs->is_array() && !kvs->empty()) {
        return std::optional<KeyValue>{kv_of((*kvs)[0])};
    }
    return std::optional<KeyValue>{};
}

Expected<std::vector<KeyValue>> EtcdClient::get_prefix(const std::string& prefix) {
    auto j =
        parsed(call("/v3/kv/range", json{{"key", base::base64_encode(prefix)},
                                         {"range_end", base::base64_encode(prefix_end(prefix))}}
                                        .dump()),
               header_);
    if (!j) return j.error();
    std::vector<KeyValue> out;
    if (auto kvs = j->find("kvs"); kvs != j->end() && kvs->is_array()) {
        for (const auto& kv : *kvs) out.push_back(kv_of(kv));
    }
    return out;
}

Expected<bool> EtcdClient::any_under(const std::string& prefix) {
    auto j =
        parsed(call("/v3/kv/range", json{{"key", base::base64_encode(prefix)},
                                         {"range_end", base::base64_encode(prefix_end(prefix))},
                                         {"limit", 1},
                                         {"keys_only", true}}
                                        .dump()),
               header_);
    if (!j) return j.error();
    const auto kvs = j->find("kvs");
    return kvs != j->end() && kvs->is_array() && !kvs->empty();
}

Expected<int64_t> EtcdClient::put(const std::string& key, const std::string& value) {
    auto j = parsed(
        call("/v3/kv/put",
             json{{"key", base::base64_encode(key)}, {"value", base::base64_encode(value)}}.dump()),
        header_);
    if (!j) return j.error();
    return header_.revision;
}

Expected<CreateResult> EtcdClient::create_if_absent(const std::string& key,
                                                    const std::string& value) {
    const std::string k = base::base64_encode(key);
    const json txn{
        {"compare",
         json::array(
             {{{"key", k}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
        {"success",
         json::array({{{"request_put", {{"key", k}, {"value", base::base64_encode(value)}}}}})},
        {"failure", json::array({{{"request_range", {{"key", k}}}}})}};
    auto j = parsed(call("/v3/kv/txn", txn.dump()), header_);
    if (!j) return j.error();
    CreateResult out;
    out.created = j->value("succeeded", false);
    out.revision = header_.revision;
    if (!out.created) {
        if (auto rs = j->find("responses"); rs != j->end() && rs->is_array() && !rs->empty()) {
            const json& range = (*rs)[0].value("response_range", json::object());
            if (auto kvs = range.find("kvs");
                kvs != range.end() && kvs->is_array() && !kvs->empty()) {
                out.held = kv_of((*kvs)[0]);
            }
        }
        // An attempt that timed out after etcd committed it, retried on another member: the
        // key holds exactly our value (callers put a nonce in it), so it is ours.
        if (out.held && out.held->value == value) {
            out.created = true;
            out.revision = out.held->mod_revision;
        }
    }
    return out;
}

Expected<EtcdClient::Status> EtcdClient::status() {
    auto j = parsed(call("/v3/maintenance/status", "{}"), header_);
    if (!j) return j.error();
    return Status{header_.member_id, uint_of(*j, "leader")};
}

Expected<bool> EtcdClient::txn(const std::vector<Compare>& compares,
                               const std::vector<Write>& writes) {
    json cmp = json::array(), ops = json::array();
    for (const Compare& c : compares) {
        const bool create = c.target == Compare::Target::kCreate;
        json one{{"key", base::base64_encode(c.key)},
                 {"target", create ? "CREATE" : "MOD"},
                 {"result", "EQUAL"},
                 {create ? "create_revision" : "mod_revision", std::to_string(c.revision)}};
        // Over a range, every key in it must compare so; a range with no key compares as one
        // absent key (create revision 0): "no key under the prefix".
        if (c.whole_prefix) one["range_end"] = base::base64_encode(prefix_end(c.key));
        cmp.push_back(std::move(one));
    }
    for (const Write& w : writes) {
        if (w.value) {
            ops.push_back({{"request_put",
                            {{"key", base::base64_encode(w.key)},
                             {"value", base::base64_encode(*w.value)}}}});
        } else {
            json range{{"key", base::base64_encode(w.key)}};
            if (w.whole_prefix) range["range_end"] = base::base64_encode(prefix_end(w.key));
            ops.push_back({{"request_delete_range", range}});
        }
    }
    auto j = parsed(call("/v3/kv/txn", json{{"compare", cmp}, {"success", ops}}.dump()), header_);
    if (!j) return j.error();
    return j->value("succeeded", false);
}

Expected<bool> EtcdClient::delete_at(const std::string& key, int64_t mod_revision) {
    const std::string k = base::base64_encode(key);
    const json txn{{"compare", json::array({{{"key", k},
                                             {"target", "MOD"},
                                             {"result", "EQUAL"},
                                             {"mod_revision", std::to_string(mod_revision)}}})},
                   {"success", json::array({{{"request_delete_range", {{"key", k}}}}})}};
    auto j = parsed(call("/v3/kv/txn", txn.dump()), header_);
    if (!j) return j.error();
    return j->value("succeeded", false);
}

}  // namespace shmipam::cluster
