; Skeleton query for Python (see queries/rust/skeleton.scm for the capture names).
; @doc marks a docstring whose first line survives when the body around it is elided.
(function_definition name: (identifier) @name body: (block) @body) @item.function
(class_definition name: (identifier) @name) @item.class
(function_definition body: (block . (expression_statement (string) @doc)))
(class_definition body: (block . (expression_statement (string) @doc)))
(comment) @comment
(module . (expression_statement (string) @doc))
