"""Where real recipes are born: the published initialisers of ``posbias_nb/data/init-recipes.json``
(each value read from its code), their formulas evaluated at the width they are used at."""
from __future__ import annotations

__all__ = ["formula", "recipes", "RECIPE_SHAPE"]


_NAMES = ("d", "d_h", "n_layers", "layer")


def formula(text, **names) -> float | None:
    """A recipe's formula (``"0.02/(2*n_layers)**0.5"``) evaluated on ``names`` (d, d_h,
    n_layers, layer): numbers, those names, + - * / ** and parentheses only; None for None.

    Raises
    ------
    ValueError
        Anything else in the text (naming it), or a name not given.
    """
    import ast
    import operator as op

    if text is None:
        return None
    ops = {ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.Div: op.truediv,
           ast.Pow: op.pow, ast.USub: op.neg, ast.UAdd: op.pos}

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) \
                and not isinstance(n.value, bool):
            return float(n.value)
        if isinstance(n, ast.Name) and n.id in _NAMES:
            if n.id not in names:
                raise ValueError(f"formula {text!r} needs {n.id}")
            return float(names[n.id])
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.operand))
        raise ValueError(f"formula {text!r}: {ast.dump(n)[:40]} is not allowed")

    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError:
        raise ValueError(f"formula {text!r} is not an expression") from None
    return ev(tree)


def _recipe_file():
    import json
    from importlib import resources

    return json.loads((resources.files("posbias_nb") / "data" / "init-recipes.json")
                      .read_text(encoding="utf-8"))


#: The shape at which a recipe that applies to any model is evaluated: Llama-3.1-8B's.
RECIPE_SHAPE = "llama3.1-8b"


def recipes() -> list[dict]:
    r"""Each published initialiser of ``init-recipes.json`` at the width it is used at (its
    configuration, or :data:`RECIPE_SHAPE`'s for a codebase's recipe), layer 1: the logit scale
    :math:`g` (:func:`posbias_nb.theory.logit_scale` from its query, key and softmax scales and
    QK-norm), the first block's update ratio (:func:`update_ratio`, value times output
    projection over the embedding's effective std), the large-:math:`n` participation
    :math:`e^{-g^2}` and KL :math:`g^2/2`, and its source."""
    from .... import theory

    data = _recipe_file()
    confs = {c["name"]: c for c in data["configs"]}
    out = []
    for r in data["recipes"]:
        names = [n.strip() for n in str(r["applies_to"]).split(",")]
        shape = next((n for n in names if n in confs), RECIPE_SHAPE)
        c = confs[shape]
        env = dict(d=c["hidden_size"], d_h=c["head_dim"], n_layers=c["layers"], layer=1)
        sq, sk = formula(r["sigma_q"], **env), formula(r["sigma_k"], **env)
        sc = formula(r["softmax_scale"], **env)
        g = theory.logit_scale(sq, sk, env["d"], env["d_h"], scale=sc,
                               qk_norm=bool(r["qk_norm"])) if sq and sk else 0.0
        b, o = formula(r["sigma_block"], **env), formula(r["sigma_out"], **env)
        e = formula(r["sigma_embed_effective"], **env)
        out.append(dict(name=r["name"], kind=r["kind"], shape=shape, width=env["d"],
                        g=float(g), g_recipe=formula(r["g"], **env),
                        rho=b * o * env["d"] / e, qk_norm=bool(r["qk_norm"]),
                        participation=theory.participation_limit(g), kl=theory.kl_limit(g),
                        source=r["source"], citation=r["citation"], notes=r.get("notes", "")))
    return out
