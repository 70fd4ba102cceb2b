// The envelope both helper protocols share (base/helper_envelope.h): a request of another
// version or op refused with code 1, an error answer read back with its code, a helper that
// answers nonsense or no CNI code read as its own fault (999), and fields refused by name.
#include "base/helper_envelope.h"

#include <gtest/gtest.h>

#include <string>

namespace shmipam::base::envelope {
namespace {

using nlohmann::json;

constexpr Protocol kTest{"the test helper", 4, "install both from one release"};

TEST(HelperEnvelope, ARequestOfAnotherVersionIsRefusedWithCodeOneSayingWhatToDo) {
    json j = request_head(kTest, "probe");
    auto got = receive(kTest, j.dump());
    ASSERT_TRUE(got) << got.error().msg;
    EXPECT_EQ(got->op, "probe");
    for (const json& v : {json(5), json("4"), json(nullptr)}) {
        j["version"] = v;
        auto r = receive(kTest, j.dump());
        ASSERT_FALSE(r) << v.dump();
        EXPECT_EQ(r.error().code, Code::kIncompatibleVersion);
        EXPECT_NE(r.error().msg.find("the test helper speaks protocol version 4"),
                  std::string::npos)
            << r.error().msg;
        EXPECT_EQ(r.error().details, "install both from one release");
    }
    j.erase("version");
    EXPECT_EQ(receive(kTest, j.dump()).error().code, Code::kIncompatibleVersion);
    EXPECT_EQ(receive(kTest, "[1, 2]").error().code, Code::kDecode);
    EXPECT_EQ(receive(kTest, "{\"version\": 4").error().code, Code::kDecode) << "cut short";
    const Error e = unknown_op(kTest, "borrow");
    EXPECT_EQ(e.code, Code::kIncompatibleVersion);
    EXPECT_NE(e.msg.find("\"borrow\""), std::string::npos);
}

TEST(HelperEnvelope, AnErrorAnswerIsReadBackWithItsCodeMessageAndDetails) {
    const json with = error_json(make_error(Code::kUnavailable, "etcd unavailable", "why"));
    auto e = answer_object(kTest, with.dump());
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Code::kUnavailable);
    EXPECT_EQ(e.error().msg, "etcd unavailable");
    EXPECT_EQ(e.error().details, "why");
    const json without = error_json(make_error(Code::kTryAgainLater, "busy"));
    EXPECT_FALSE(without.contains("details")) << "no empty details on the wire";
    EXPECT_EQ(answer_object(kTest, without.dump()).error().code, Code::kTryAgainLater);
    auto ok = answer_object(kTest, R"({"released": true})");
    ASSERT_TRUE(ok);
    EXPECT_EQ((*ok)["released"], true);
}

// A helper that crashed, or printed something other than an answer, is the helper's fault: the
// plugin answers 999 with what it printed (bounded), never a code the helper did not mean.
TEST(HelperEnvelope, NonsenseOrACodeThatIsNoCniCodeIsTheHelpersFault) {
    for (const char* text : {R"({"code": "7"})", R"({"code": 0})", R"({"code": -7})",
                             R"({"code": 4294967303})", "Segmentation fault", "[]"}) {
        auto a = answer_object(kTest, text);
        ASSERT_FALSE(a) << text;
        EXPECT_EQ(a.error().code, Code::kInternal) << text;
    }
    const std::string long_text(10 * kAnswerShownBytes, 'x');
    auto a = answer_object(kTest, long_text);
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().details.size(), kAnswerShownBytes);
    EXPECT_NE(a.error().msg.find("the test helper"), std::string::npos);
}

TEST(HelperEnvelope, FieldsOfTheWrongTypeAreRefusedNamingTheFieldNeverThrown) {
    const json j = {{"name", 5},        {"count", -1}, {"ok", "yes"},
                    {"labels", {1, 2}}, {"at", 1.5},   {"given", "x"}};
    const FieldReader in(kTest, j, "probe request");
    const auto refused = [](const Error& e, const char* field) {
        EXPECT_EQ(e.code, Code::kInvalidConfig);
        EXPECT_NE(
            e.msg.find(std::string("the test helper's probe request needs \"") + field + "\""),
            std::string::npos)
            << e.msg;
    };
    refused(in.text("name").error(), "name");
    refused(in.count("count", 1).error(), "count");
    refused(in.flag("ok").error(), "ok");
    refused(in.strings("labels").error(), "labels");
    refused(in.integer("at", 0).error(), "at");
    refused(in.text("absent").error(), "absent");
    refused(in.count("absent", std::nullopt).error(), "absent");
    EXPECT_EQ(*in.text("absent", /*required=*/false), "");
    EXPECT_EQ(*in.count("absent", 32), 32u);
    EXPECT_EQ(*in.integer("absent", -3), -3);
    EXPECT_FALSE(*in.flag("absent"));
    EXPECT_TRUE(in.strings("absent")->empty());
    EXPECT_EQ(*in.text("given"), "x");
}

}  // namespace
}  // namespace shmipam::base::envelope
