#include "kube/api_status.h"

#include <nlohmann/json.hpp>

namespace shmipam::kube {

using nlohmann::json;

namespace {

// What of a body that is not a Status goes into a message: enough to recognise a proxy's page.
constexpr size_t kQuotedBodyBytes = 200;

std::string text_of(const json& j, const char* field) {
    auto it = j.find(field);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The quoted start of a body, with control characters (a binary answer) shown as '?'.
std::string quoted(std::string_view body) {
    std::string out(body.substr(0, kQuotedBodyBytes));
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20) c = c == '\n' || c == '\t' ? ' ' : '?';
    }
    if (body.size() > kQuotedBodyBytes) out += "...";
    return out;
}

}  // namespace

std::optional<ApiStatus> decode_status(std::string_view body) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || text_of(j, "kind") != "Status") return std::nullopt;
    ApiStatus s;
    s.status = text_of(j, "status");
    s.reason = text_of(j, "reason");
    s.message = text_of(j, "message");
    if (auto c = j.find("code"); c != j.end() && c->is_number_integer()) s.code = c->get<int64_t>();
    if (auto d = j.find("details"); d != j.end() && d->is_object()) {
        s.details_name = text_of(*d, "name");
        s.details_group = text_of(*d, "group");
        s.details_kind = text_of(*d, "kind");
    }
    return s;
}

std::string describe_answer(long http_status, std::string_view body) {
    std::string out = "HTTP " + std::to_string(http_status);
    if (auto s = decode_status(body)) {
        if (!s->reason.empty()) out += " " + s->reason;
        if (!s->message.empty()) out += ": " + s->message;
        return out;
    }
    if (!body.empty()) out += ": " + quoted(body);
    return out;
}

}  // namespace shmipam::kube
