# bash completion for attn, installed as share/bash-completion/completions/attn.
#
# The options of `attn compute` are listed here, with their values where they are
# fixed, except the stages (--dump, plot --stage) and the formats (--format), which are
# read from `attn compute --help` and `attn plot --help` (the stage table and the
# registry of formats print them there); tests/test_completion.cpp checks that every
# long option of `attn compute --help` and every subcommand of `attn --help` appears in
# this file. The other subcommands'
# options are read from their own --help when completing, so they cannot go stale;
# the values of --max-bytes (compute, plot, inspect, compare, rollout) are completed for all.

_attn_subcommands="compute generate posenc inspect compare plot rope rollout view tokenize"

_attn_compute_options="--help --q --k --v --x --x-kv --wq --wk --wv --bq --bk --bv --wo --bo
  --in-proj-weight --in-proj-bias --attn-mask --key-padding-mask --attention-mask --token-ids --embedding --ids --past-key
  --past-value --mask --causal --causal-align --lengths --pad-id --window --prefix-len --sink-tokens --alibi --alibi-slopes --cu-seqlens --document-ids --sinks --position-ids --rope-cos --rope-sin --rope --rope-theta
  --rotary-dim --attn-mask-true --layout --seq-first --batch-first --mask-fill
  --masked-rows
  --scale --softcap --heads --kv-heads --weight-layout --dtype --posenc --posenc-base --kernel
  --average-heads --tokens --tokens-kv --dump --format --output --store --precision --compact --json-nonfinite --full --plot
  --jobs --max-bytes --manifest --sink-k
  --layer --arch --config --vocab --text --text-file --tokenizer --no-special-tokens --words"

# Long options defined in `attn SUBCOMMAND --help` (lines "  -o,--output TEXT ...").
_attn_help_options() {
    "$1" "$2" --help 2>/dev/null | sed -nE 's/^ +(-[a-zA-Z],)?(--[a-z0-9][a-z0-9-]*).*/\2/p'
}

# The fixed values of option $3 as `attn $2 --help` lists them ("  --style TEXT:{a,b} ...").
_attn_help_values() {
    "$1" "$2" --help 2>/dev/null | sed -nE "s/^ +(-[a-zA-Z],)?$3 [A-Z]+:\{([^}]*)\}.*/\2/p" | tr ',' ' '
}

# The stages --dump takes, from `attn compute --help` ("Stages to write, comma-separated:
# x x_norm ... rollout (..."), which lists the stage table (src/stages.cpp).
_attn_stages() {
    "$1" compute --help 2>/dev/null | tr -s ' \n' '  ' | sed -nE 's/.*Stages to write, comma-separated: ([a-z_ ]+) \(.*/\1/p'
}

# Completes the last item of a comma-separated list.
_attn_comma_list() {
    local prefix="" last=$cur
    if [[ $cur == *,* ]]; then
        prefix=${cur%,*},
        last=${cur##*,}
    fi
    COMPREPLY=($(compgen -P "$prefix" -W "$1" -- "$last"))
    compopt -o nospace 2>/dev/null
}

_attn() {
    local cur prev words cword split
    _init_completion -s || return

    local sub="" i
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} != -* ]]; then
            sub=${words[i]}
            break
        fi
    done
    if [[ -z $sub ]]; then
        COMPREPLY=($(compgen -W "$_attn_subcommands --help --version" -- "$cur"))
        return
    fi

    if [[ $prev == --max-bytes ]]; then
        COMPREPLY=($(compgen -W "512M 1G 2G 4G" -- "$cur"))
        return
    fi
    if [[ $sub == compute || $sub == plot || $sub == view ]]; then
        case $prev in
            --mask) _attn_comma_list "none causal padding"; return ;;
            --dump) _attn_comma_list "$(_attn_stages "${words[0]}")"; return ;;
            --causal-align) COMPREPLY=($(compgen -W "top-left bottom-right" -- "$cur")); return ;;
            --masked-rows) COMPREPLY=($(compgen -W "zero nan" -- "$cur")); return ;;
            --kernel) COMPREPLY=($(compgen -W "fast reference" -- "$cur")); return ;;
            --arch) COMPREPLY=($(compgen -W "gpt2 bert llama gemma gemma2 gemma3 mixtral qwen2_moe gpt_oss qwen3 qwen3_moe olmo2 gpt_neox phi3" -- "$cur")); return ;;
            --layer) COMPREPLY=($(compgen -W "0 1 all" -- "$cur")); return ;;
            --config | --vocab | --tokenizer) _filedir json; return ;;
            --text-file) _filedir; return ;;
            --store) COMPREPLY=($(compgen -W "float16 bfloat16" -- "$cur")); return ;;
            --rope) COMPREPLY=($(compgen -W "half interleaved" -- "$cur")); return ;;
            --attn-mask-true) COMPREPLY=($(compgen -W "attend masked" -- "$cur")); return ;;
            --stage) COMPREPLY=($(compgen -W "$(_attn_help_values "${words[0]}" plot --stage)" -- "$cur")); return ;;
            --weight-layout) COMPREPLY=($(compgen -W "out-in in-out" -- "$cur")); return ;;
            --layout) COMPREPLY=($(compgen -W "bhtd bthd tbe bte" -- "$cur")); return ;;
            --dtype) COMPREPLY=($(compgen -W "float32 float64" -- "$cur")); return ;;
            --posenc) COMPREPLY=($(compgen -W "interleaved concat" -- "$cur")); return ;;
            --format) COMPREPLY=($(compgen -W "$(_attn_help_values "${words[0]}" compute --format)" -- "$cur")); return ;;
            --mask-fill) COMPREPLY=($(compgen -W "-inf -1e9" -- "$cur")); return ;;
            --lengths | --ids | --window | --prefix-len | --sink-tokens | --cu-seqlens | --rope-theta | \
                --rotary-dim | --pad-id | --scale | --softcap | --heads | --kv-heads | --posenc-base | --tokens | \
                --tokens-kv | --precision | -j | --jobs | --sink-k)
                return ;;
            -o | --output | --plot | --manifest | --q | --k | --v | --x | --x-kv | --wq | --wk | --wv | --bq | \
                --bk | --bv | --wo | --bo | --in-proj-weight | --in-proj-bias | --attn-mask | \
                --key-padding-mask | --attention-mask | --token-ids | --embedding | --alibi-slopes | --document-ids | --sinks | \
                --position-ids | --rope-cos | --rope-sin | --past-key | --past-value)
                _filedir
                return ;;
        esac
    fi
    if [[ $sub != compute && $prev == --* ]]; then
        # Other subcommands (posenc --style, inspect --format, ...): values from their --help.
        local values
        values=$(_attn_help_values "${words[0]}" "$sub" "$prev")
        if [[ -n $values ]]; then
            COMPREPLY=($(compgen -W "$values" -- "$cur"))
            return
        fi
    fi
    $split && return

    if [[ $cur == -* ]]; then
        local options
        if [[ $sub == compute ]]; then
            options=$_attn_compute_options
        else
            options=$(_attn_help_options "${words[0]}" "$sub")
        fi
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
        [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
        return
    fi
    _filedir
}
complete -F _attn attn
