#pragma once
/// \file text_stream.hpp
/// Text outputs of a run of several layers written layer by layer (docs/design.md §5.4):
/// the held writers order their text tensor by tensor, each tensor's layers in turn, so
/// each tensor's text is spooled as its layers arrive (in nameless files beside the
/// destination) and joined at the end; memory stays at one layer's text whatever the
/// number of layers.

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "attn/io/document.hpp"

namespace attn::io {

/// A temporary file with no name, in the directory of `beside` (the destination, so that
/// it fills the disk the output goes to): open(O_TMPFILE), else mkstemp and an immediate
/// unlink. No exit path leaves it behind, a killed process included: it is gone once its
/// descriptor closes. Source: open(2) O_TMPFILE.
class spool {
public:
    /// Throws io_error(beside, "cannot create a temporary file (<reason>)").
    explicit spool(const std::string& beside);
    spool(const spool&) = delete;
    spool& operator=(const spool&) = delete;
    ~spool();

    /// Where the text goes (buffered).
    std::ostream& stream();
    /// Flushes, then appends everything written so far to `out`. Throws io_error (naming
    /// `beside`) when the spool cannot be written or read back; `out`'s failures are the
    /// caller's to check.
    void copy_to(std::ostream& out);

private:
    struct impl;
    std::unique_ptr<impl> p_;
};

/// CSV of a run of several layers, streamed: write_csv's bytes for the stacked document
/// (tensor by tensor, each tensor's layers in order, the `layer` column the model's
/// layer), made one layer at a time. Each tensor's lines go to a spool of its own, and
/// finish() writes the header and the spools, in tensor order, to `out`.
class csv_stream {
public:
    /// `out` receives the whole text at finish(); `beside` is the destination whose
    /// directory holds the spools; `count` is the number of layers the run hands on.
    csv_stream(std::ostream& out, std::string beside, std::size_t count, const text_style& style);
    ~csv_stream();

    /// Appends one layer's document (no layer axis; the first layer fixes the tensors, each
    /// later one must hold the same names) whose model layer is `number`. Throws
    /// shape_error / value_error as check_csv_layer (on the first layer, before anything is
    /// spooled), shape_error ("weights: does not continue its streamed CSV (expected
    /// …)") for a layer whose tensors differ from the first's, io_error for a spool that
    /// cannot be written.
    void append(const document& layer, std::size_t number);

    /// Writes the header and every spool, in tensor order, to `out` and flushes it.
    /// Throws shape_error when fewer than `count` layers were appended ("streamed in part
    /// (expected 4 layers, got 2)"), io_error when `out` fails.
    void finish();

private:
    std::ostream& out_;
    std::string beside_;
    std::size_t count_, appended_ = 0;
    text_style style_;
    std::vector<std::string> names_;
    std::vector<std::unique_ptr<spool>> spools_;
};

/// JSON (one document) of a run of several layers, streamed: write_json's bytes for the
/// stacked document, pretty or compact, made one layer at a time. Each tensor's layers go
/// to a spool of its own (write_json_layer); finish() writes the run's meta and labels and
/// each tensor's spool between the brackets of its layer axis (write_json_joined).
class json_stream {
public:
    /// As csv_stream's.
    json_stream(std::ostream& out, std::string beside, std::size_t count, const text_style& style);
    ~json_stream();

    /// Appends one layer's document (no layer axis; the first layer fixes the tensors and
    /// their shapes, each later one must hold the same). Throws shape_error ("weights: does
    /// not continue its streamed JSON (expected …)"), value_error (bytes that do not match
    /// a shape), io_error for a spool that cannot be written.
    void append(const document& layer);

    /// Writes `run` (the run's document: its meta, with the stacked shapes, and labels; its
    /// tensors, if any, are ignored) with every spooled tensor, in order, to `out`, and
    /// flushes it. Throws shape_error when fewer than `count` layers were appended,
    /// io_error when `out` fails.
    void finish(const document& run);

private:
    std::ostream& out_;
    std::string beside_;
    std::size_t count_, appended_ = 0;
    text_style style_;
    std::vector<named_array> plan_;  ///< names and one layer's dtype and shape, no data
    std::vector<std::unique_ptr<spool>> spools_;
};

}  // namespace attn::io
