#include "tools/verbs/kubeconfig_token.h"

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/base64.h"
#include "kube/names.h"

namespace shmipam::tools {

namespace {

constexpr const char* kStatePrefix = "# shmipam-token: ";
constexpr const char* kServiceAccountSubject = "system:serviceaccount:";
// The renewal moves by up to this share of the time to it either way.
constexpr int64_t kJitterShareOfRenewal = 10;

}  // namespace

std::string token_state_line(const TokenState& s) {
    switch (s.source) {
        case TokenState::Source::kNone:
            return "";
        case TokenState::Source::kRequested:
            return std::string(kStatePrefix) +
                   "source=requested expires=" + std::to_string(s.expires) +
                   " next=" + std::to_string(s.next) + "\n";
        case TokenState::Source::kProjected:
            return std::string(kStatePrefix) + "source=projected next=" + std::to_string(s.next) +
                   "\n";
    }
    return "";
}

TokenState read_token_state(const std::string& text) {
    TokenState s;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with(kStatePrefix)) continue;
        std::istringstream words(line.substr(std::string(kStatePrefix).size()));
        TokenState found;
        for (std::string w; words >> w;) {
            const size_t eq = w.find('=');
            if (eq == std::string::npos) continue;
            const std::string key = w.substr(0, eq), value = w.substr(eq + 1);
            try {
                if (key == "source" && value == "requested")
                    found.source = TokenState::Source::kRequested;
                if (key == "source" && value == "projected")
                    found.source = TokenState::Source::kProjected;
                if (key == "expires") found.expires = std::stoll(value);
                if (key == "next") found.next = std::stoll(value);
            } catch (const std::exception&) {
                return TokenState{};  // not ours after all: asked again
            }
        }
        return found;
    }
    return s;
}

int64_t renew_time(int64_t now, int64_t expires) {
    const int64_t quarter = expires > now ? (expires - now) / 4 : 0;
    const int64_t spread = quarter / kJitterShareOfRenewal;
    if (spread == 0) return now + quarter;
    std::random_device random;
    std::uniform_int_distribution<int64_t> jitter(-spread, spread);
    return now + quarter + jitter(random);
}

Expected<std::pair<std::string, std::string>> service_account_of(const std::string& jwt) {
    const size_t first = jwt.find('.');
    const size_t second = first == std::string::npos ? first : jwt.find('.', first + 1);
    const auto not_one = [&](const std::string& why) {
        return make_error(Code::kInvalidConfig,
                          "the service account token is not a service account's JWT (" + why +
                              "): give --service-account NAMESPACE/NAME");
    };
    if (second == std::string::npos) return not_one("not three dot-separated parts");
    // base64url without padding, as JWTs are written.
    std::string payload = jwt.substr(first + 1, second - first - 1);
    for (char& c : payload) c = c == '-' ? '+' : c == '_' ? '/' : c;
    while (payload.size() % 4 != 0) payload += '=';
    auto decoded = base::base64_decode_strict(payload);
    if (!decoded) return not_one("its payload is not base64url");
    const auto claims = nlohmann::json::parse(*decoded, nullptr, false);
    if (!claims.is_object() || !claims.contains("sub") || !claims["sub"].is_string()) {
        return not_one("no \"sub\" claim");
    }
    const std::string sub = claims["sub"];
    if (!sub.starts_with(kServiceAccountSubject)) return not_one("\"sub\" is " + sub);
    const std::string rest = sub.substr(std::string(kServiceAccountSubject).size());
    const size_t colon = rest.find(':');
    if (colon == std::string::npos) return not_one("\"sub\" is " + sub);
    std::pair<std::string, std::string> who{rest.substr(0, colon), rest.substr(colon + 1)};
    if (kube::not_a_dns_label(who.first) || kube::not_a_dns_subdomain(who.second)) {
        return not_one("\"sub\" is " + sub);
    }
    return who;
}

}  // namespace shmipam::tools
