// ONNX Runtime's side of scripts/bench: times InferenceSession.run of one Attention model
// in-process, as attn_bench times attn. Prints {"ms": median} on stdout.
//
// Usage: node scripts/bench_ort.js ORT_NODE_DIR MODEL.onnx T REPS THREADS
//   ORT_NODE_DIR: the onnxruntime-node package folder (build-ort/node_modules/onnxruntime-node)
//   MODEL.onnx:   Attention-23 with inputs Q, K, V of shape (1, 8, T, 64), float32
"use strict";

const [ortDir, model, lenText, repsText, threadsText] = process.argv.slice(2);
const ort = require(ortDir);
const T = Number(lenText), reps = Number(repsText), threads = Number(threadsText);

/// Standard normal values (Marsaglia polar) from a fixed-seed xorshift generator.
function normal(n, seed) {
    let s = seed >>> 0 || 1;
    const uniform = () => {
        s ^= s << 13; s >>>= 0;
        s ^= s >>> 17;
        s ^= s << 5; s >>>= 0;
        return s / 4294967296 * 2 - 1;
    };
    const out = new Float32Array(n);
    for (let i = 0; i < n; i += 2) {
        let u, v, r;
        do { u = uniform(); v = uniform(); r = u * u + v * v; } while (r >= 1 || r === 0);
        const f = Math.sqrt(-2 * Math.log(r) / r);
        out[i] = u * f;
        if (i + 1 < n) out[i + 1] = v * f;
    }
    return out;
}

async function main() {
    const session = await ort.InferenceSession.create(model, {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: "sequential",
        graphOptimizationLevel: "all",
    });
    const dims = [1, 8, T, 64], n = 8 * T * 64;
    const feeds = {
        Q: new ort.Tensor("float32", normal(n, 1), dims),
        K: new ort.Tensor("float32", normal(n, 2), dims),
        V: new ort.Tensor("float32", normal(n, 3), dims),
    };
    await session.run(feeds);  // warm-up
    const times = [];
    for (let r = 0; r < reps; ++r) {
        const t = process.hrtime.bigint();
        await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(JSON.stringify({ ms: times[Math.floor(times.length / 2)] }));
}

main().catch((e) => {
    console.error(`bench_ort: ${e.message}`);
    process.exit(1);
});
