#include "kube/token_request.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "kube/api_status.h"

namespace shmipam::kube {

using nlohmann::json;

std::optional<int64_t> parse_rfc3339(const std::string& text) {
    std::tm tm{};
    const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == nullptr) return std::nullopt;
    if (*rest == '.') {  // fractions of a second
        ++rest;
        while (*rest >= '0' && *rest <= '9') ++rest;
    }
    int64_t offset = 0;
    if (*rest == 'Z' || *rest == 'z') {
        ++rest;
    } else if (*rest == '+' || *rest == '-') {
        const int sign = *rest == '-' ? -1 : 1;
        int hours = 0, minutes = 0;
        if (std::sscanf(rest + 1, "%2d:%2d", &hours, &minutes) != 2) return std::nullopt;
        offset = sign * (hours * 3600 + minutes * 60);
        rest += 6;
    } else {
        return std::nullopt;
    }
    if (*rest != '\0') return std::nullopt;
    return int64_t(::timegm(&tm)) - offset;
}

Expected<IssuedToken> request_token(ApiClient& client, const std::string& ns,
                                    const std::string& name, int64_t seconds) {
    const std::string path = "/api/v1/namespaces/" + ns + "/serviceaccounts/" + name + "/token";
    const std::string post = "POST " + client.url(path) + ": ";
    const json body = {{"apiVersion", "authentication.k8s.io/v1"},
                       {"kind", "TokenRequest"},
                       {"spec", {{"expirationSeconds", seconds}}}};
    auto answer = client.post(path, body.dump());
    if (!answer) return answer.error();
    const std::string said = describe_answer(answer->status, answer->body);
    const std::string who =
        "kubeconfig " + client.config().path + " (user \"" + client.config().user + "\")";
    const std::string verb = "create serviceaccounts/token of " + ns + "/" + name;
    switch (answer->status) {
        case 200:
        case 201: {
            const json j = json::parse(answer->body, nullptr, false);
            const json* status = j.is_object() && j.contains("status") ? &j["status"] : nullptr;
            if (status == nullptr || !status->is_object() || !status->contains("token") ||
                !(*status)["token"].is_string() || (*status)["token"].get<std::string>().empty() ||
                !status->contains("expirationTimestamp") ||
                !(*status)["expirationTimestamp"].is_string()) {
                return make_error(Code::kInternal,
                                  post + "the answer is no TokenRequest with a token: " + said);
            }
            auto expires = parse_rfc3339((*status)["expirationTimestamp"].get<std::string>());
            if (!expires) {
                return make_error(Code::kInternal,
                                  post + "status.expirationTimestamp \"" +
                                      (*status)["expirationTimestamp"].get<std::string>() +
                                      "\" is no RFC 3339 time");
            }
            return IssuedToken{(*status)["token"].get<std::string>(), *expires};
        }
        case 401:
            return make_error(Code::kInvalidConfig, post +
                                                        "the API server does not accept the "
                                                        "credentials of " +
                                                        who + ": " + said);
        case 403:
            return make_error(Code::kInvalidConfig,
                              post + "the API server forbids " + who + " to " + verb +
                                  " (the DaemonSet's role needs create on serviceaccounts/token "
                                  "for its own account: deploy/kubernetes): " +
                                  said);
        case 404:
            return make_error(Code::kInvalidConfig, post + "no service account " + ns + "/" + name +
                                                        ", or no TokenRequest API: " + said);
        case 408:
        case 429:
            return make_error(Code::kTryAgainLater, post + said);
        default:
            if (answer->status >= 500) return make_error(Code::kTryAgainLater, post + said);
            if (answer->status >= 400) {
                return make_error(Code::kInvalidConfig, post + "the request was refused: " + said);
            }
            return make_error(Code::kInternal,
                              post + "an answer the helper does not expect: " + said);
    }
}

}  // namespace shmipam::kube
