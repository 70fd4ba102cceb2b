// The helper programs' side of base/helper_envelope.h, apart from the plugin's: only the
// helpers' mains print, so only they link the streams.
#include <iostream>
#include <iterator>

#include "base/helper_envelope.h"

namespace shmipam::base::envelope {

using nlohmann::json;

int answer(const json& a) {
    std::cout << a.dump() << "\n";
    return 0;
}

int answer_error(const Error& e) {
    std::cout << error_json(e).dump() << "\n";
    return 1;
}

int helper_main(const Protocol& p, FunctionRef<int(std::string_view request)> serve) {
    try {
        const std::string text{std::istreambuf_iterator<char>(std::cin),
                               std::istreambuf_iterator<char>()};
        return serve(text);
    } catch (const std::exception& e) {
        return answer_error(
            make_error(Code::kInternal, std::string(p.speaker) + " failed: " + e.what()));
    } catch (...) {
        return answer_error(make_error(Code::kInternal, std::string(p.speaker) + " failed"));
    }
}

}  // namespace shmipam::base::envelope
