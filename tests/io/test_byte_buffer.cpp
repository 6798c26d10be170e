// attn::byte_buffer (attn/tensor.hpp): owned bytes or a view kept alive by its owner;
// writing through a view copies it first, so buffers behave as values.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "attn/tensor.hpp"

using attn::byte_buffer;

namespace {

std::vector<std::byte> bytes(std::initializer_list<int> v) {
    std::vector<std::byte> out;
    for (int x : v) out.push_back(static_cast<std::byte>(x));
    return out;
}

}  // namespace

TEST_CASE("byte_buffer: a view reads the owner's bytes and keeps the owner alive") {
    std::weak_ptr<std::vector<std::byte>> watch;
    byte_buffer b;
    {
        auto owner = std::make_shared<std::vector<std::byte>>(bytes({1, 2, 3, 4}));
        watch = owner;
        b = byte_buffer::view(owner, owner->data() + 1, 2);
    }
    REQUIRE(!watch.expired());  // the view holds the owner
    const byte_buffer& cb = b;
    CHECK(cb.is_view());
    CHECK(cb.size() == 2);
    CHECK(cb[0] == std::byte{2});
    CHECK(cb == byte_buffer(bytes({2, 3})));
    b.clear();
    CHECK(watch.expired());
    CHECK(b.empty());
}

TEST_CASE("byte_buffer: writing through a view copies, the owner and other copies are unchanged") {
    auto owner = std::make_shared<std::vector<std::byte>>(bytes({5, 6, 7}));
    const byte_buffer view = byte_buffer::view(owner, owner->data(), owner->size());
    byte_buffer copy = view;  // shares the view
    CHECK(copy.is_view());
    copy[1] = std::byte{60};  // copy on write
    CHECK(!copy.is_view());
    CHECK(copy == byte_buffer(bytes({5, 60, 7})));
    CHECK((*owner)[1] == std::byte{6});
    CHECK(view == byte_buffer(bytes({5, 6, 7})));
    byte_buffer grown = view;
    grown.resize(5);
    CHECK(grown.size() == 5);
    CHECK(grown[2] == std::byte{7});
    CHECK(view.size() == 3);
    CHECK(view.to_vector() == bytes({5, 6, 7}));
}

TEST_CASE("array::view shares float data without a copy, array::from copies") {
    auto values = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, -2.0f, 0.25f, 8.0f});
    const attn::array v = attn::array::view<float>({2, 2}, values, values->data());
    CHECK(v.type == attn::dtype::f4);
    CHECK(v.data.is_view());
    CHECK(v.data.data() == reinterpret_cast<const std::byte*>(values->data()));
    CHECK(v.to_vector<float>() == *values);
    const attn::array c = attn::array::from<float>({2, 2}, values->data());
    CHECK(!c.data.is_view());
    CHECK(c.data == v.data);
}
