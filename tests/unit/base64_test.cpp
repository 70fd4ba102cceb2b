#include "base/base64.h"

#include <gtest/gtest.h>

namespace shmipam::base {
namespace {

// RFC 4648, section 10.
TEST(Base64, EncodesTheRfcVectors) {
    const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                           {"f", "Zg=="},
                                                           {"fo", "Zm8="},
                                                           {"foo", "Zm9v"},
                                                           {"foob", "Zm9vYg=="},
                                                           {"fooba", "Zm9vYmE="},
                                                           {"foobar", "Zm9vYmFy"}};
    for (const auto& [plain, coded] : vectors) {
        EXPECT_EQ(base64_encode(plain), coded) << plain;
        EXPECT_EQ(base64_decode(coded), plain) << coded;
    }
}

TEST(Base64, RoundTripsEveryByte) {
    std::string all;
    for (int i = 0; i < 256; ++i) all += char(i);
    for (size_t n = 0; n <= all.size(); n += 37) {
        EXPECT_EQ(base64_decode(base64_encode(all.substr(0, n))), all.substr(0, n)) << n;
    }
}

}  // namespace
}  // namespace shmipam::base
