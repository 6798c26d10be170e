#pragma once
// What a user reads of a library error: core names settings in its own terms
// (`window`, `prefix_len`), the command line by its flags (src/cli/flag_terms.hpp).

#include <utility>

#include "../src/cli/flag_terms.hpp"
#include "attn/error.hpp"

/// Calls f(); an attn error it throws is thrown again, of the same type, with its what()
/// in the command line's terms, as `attn` prints it.
template <class F>
void in_cli_terms(F&& f) {
    using attn::cli::in_flag_terms;
    try {
        std::forward<F>(f)();
    } catch (const attn::usage_error& e) {
        throw attn::usage_error("", in_flag_terms(e.what()));
    } catch (const attn::limit_error& e) {
        throw attn::limit_error("", in_flag_terms(e.what()));
    } catch (const attn::value_error& e) {
        throw attn::value_error("", in_flag_terms(e.what()));
    } catch (const attn::shape_error& e) {
        throw attn::shape_error("", in_flag_terms(e.what()));
    }
}
