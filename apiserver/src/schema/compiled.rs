//! The compiled form of a [`SchemaSource`]: every schema node in one arena,
//! `$ref`s resolved to node ids, so recursive types (JSONSchemaProps) need
//! no cycles of pointers and shared definitions (ObjectMeta) are compiled
//! once.
//!
//! A field that names a definition and adds its own markers, as the
//! built-ins write it:
//!
//! ```text
//! "strategy": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}],
//!              "description": "...", "x-kubernetes-patch-strategy": "retainKeys"}
//! ```
//!
//! compiles to a node whose `base` is the DeploymentStrategy node and which
//! keeps only its own markers. [`SchemaRef`] answers structure (type,
//! properties, items, required, list and map types, ...) from the base,
//! the definition, and patch markers from the field itself, which is where
//! kube's `PatchMetaFromOpenAPI` reads them. A bare `{"$ref": ...}` (array
//! items) is the definition's node itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::source::{SchemaSource, REF_PREFIX};

/// An index into [`Compiled`]'s nodes.
pub(crate) type NodeId = u32;

/// An OpenAPI `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// `object`.
    Object,
    /// `array`.
    Array,
    /// `string`.
    String,
    /// `integer`.
    Integer,
    /// `number`.
    Number,
    /// `boolean`.
    Boolean,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    /// The name as written in a schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// `atomic`: replaced whole.
    Atomic,
    /// `set`: unique scalar items.
    Set,
    /// `map`: items keyed by `x-kubernetes-list-map-keys`.
    Map,
}

/// `x-kubernetes-map-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapType {
    /// `atomic`: replaced whole.
    Atomic,
    /// `granular`: each key on its own (the default).
    Granular,
}

/// `additionalProperties`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Additional {
    /// Not given.
    #[default]
    Unset,
    /// `true` or `false`.
    Bool(bool),
    /// A schema for every value.
    Schema(NodeId),
}

/// A compiled `pattern`: the regex, or why it does not compile.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub(crate) source: String,
    pub(crate) regex: Result<regex::Regex, String>,
}

/// One schema node. Fields mirror OpenAPI v3 and kube's extensions; see
/// [`SchemaRef`] for what each answers.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub(crate) base: Option<NodeId>,
    pub(crate) def: Option<Arc<str>>,
    pub(crate) ty: Option<Type>,
    pub(crate) format: Option<String>,
    pub(crate) nullable: bool,
    pub(crate) properties: BTreeMap<String, NodeId>,
    pub(crate) props_given: bool,
    pub(crate) additional: Additional,
    pub(crate) items: Option<NodeId>,
    pub(crate) required: Vec<String>,
    pub(crate) enumeration: Option<Vec<Value>>,
    pub(crate) default: Option<Value>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) max_properties: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) all_of: Vec<NodeId>,
    pub(crate) any_of: Vec<NodeId>,
    pub(crate) one_of: Vec<NodeId>,
    pub(crate) not: Option<NodeId>,
    pub(crate) list_type: Option<ListType>,
    pub(crate) list_map_keys: Vec<String>,
    pub(crate) map_type: Option<MapType>,
    pub(crate) patch_strategy: Option<String>,
    pub(crate) patch_merge_key: Option<String>,
    pub(crate) int_or_string: bool,
    pub(crate) preserve_unknown_fields: bool,
    pub(crate) embedded_resource: bool,
    /// `x-kubernetes-validations`, as written (compiled into
    /// [`super::cel_rules::Rules`] for custom kinds).
    pub(crate) validations: Vec<Value>,
}

/// Where a layer of schemas came from, which decides how unknown fields
/// are dropped ([`crate::schema::Schema::prune`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Built-in types: dropped as Go's decoder drops what its structs do
    /// not declare.
    Builtin,
    /// Custom resources: kube's structural pruning.
    Custom,
}

/// Every schema of one [`SchemaSource`], compiled: an arena of nodes, the
/// node of each definition and of each kind, and the source itself (the
/// OpenAPI documents serve it).
#[derive(Debug)]
pub struct Compiled {
    nodes: Vec<Node>,
    defs: HashMap<String, NodeId>,
    kinds: HashMap<(String, String, String), NodeId>,
    source: SchemaSource,
    origin: Origin,
    /// Whether any node has a `default`.
    has_defaults: bool,
}

impl Compiled {
    /// Compiles every definition of `source`. Never fails: keys it does
    /// not know are ignored, a `$ref` to an unknown name is an empty
    /// schema, and a `pattern` that is not a valid regex is kept with its
    /// error, which validation reports as kube-openapi does. A CRD's
    /// schema should pass [`crate::schema::validate_crd_schema`] first.
    pub fn compile(source: SchemaSource, origin: Origin) -> Compiled {
        let mut c = Compiled { nodes: Vec::new(), defs: HashMap::new(), kinds: HashMap::new(), source: SchemaSource::default(), origin, has_defaults: false };
        // Every definition gets its id first, so `$ref`s can point forward.
        let names: Vec<String> = source.definitions().map(|(n, _)| n.to_string()).collect();
        for n in &names {
            let id = c.push(Node { def: Some(Arc::from(n.as_str())), ..Node::default() });
            c.defs.insert(n.clone(), id);
        }
        for (name, schema) in source.definitions() {
            if let Some(&id) = c.defs.get(name) {
                c.fill(id, schema);
            }
        }
        for ((g, v, k), name) in source.kinds() {
            if let Some(&id) = c.defs.get(name) {
                c.kinds.insert((g.clone(), v.clone(), k.clone()), id);
            }
        }
        c.source = source;
        c.has_defaults = c.nodes.iter().any(|n| n.default.is_some());
        c
    }

    /// The source these schemas were compiled from.
    pub fn source(&self) -> &SchemaSource {
        &self.source
    }

    /// Whether these are built-in or custom schemas.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Whether any node has a `default`.
    pub fn has_defaults(&self) -> bool {
        self.has_defaults
    }

    /// The node of a kind, if this layer has it.
    pub(crate) fn kind_node(&self, group: &str, version: &str, kind: &str) -> Option<NodeId> {
        self.kinds.get(&(group.to_string(), version.to_string(), kind.to_string())).copied()
    }

    /// The node of a definition by name.
    pub(crate) fn def_node(&self, name: &str) -> Option<NodeId> {
        self.defs.get(name).copied()
    }

    /// How many nodes the arena holds (ids are `0..len`).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A cursor at node `id`.
    pub(crate) fn at(&self, id: NodeId) -> SchemaRef<'_> {
        SchemaRef { c: self, id }
    }

    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        // Schemas have far fewer than 2^32 nodes; saturate rather than wrap.
        u32::try_from(self.nodes.len() - 1).unwrap_or(u32::MAX)
    }

    fn node(&self, id: NodeId) -> &Node {
        static EMPTY: Node = Node {
            base: None,
            def: None,
            ty: None,
            format: None,
            nullable: false,
            properties: BTreeMap::new(),
            props_given: false,
            additional: Additional::Unset,
            items: None,
            required: Vec::new(),
            enumeration: None,
            default: None,
            maximum: None,
            exclusive_maximum: false,
            minimum: None,
            exclusive_minimum: false,
            max_length: None,
            min_length: None,
            pattern: None,
            max_items: None,
            min_items: None,
            unique_items: false,
            multiple_of: None,
            max_properties: None,
            min_properties: None,
            all_of: Vec::new(),
            any_of: Vec::new(),
            one_of: Vec::new(),
            not: None,
            list_type: None,
            list_map_keys: Vec::new(),
            map_type: None,
            patch_strategy: None,
            patch_merge_key: None,
            int_or_string: false,
            preserve_unknown_fields: false,
            embedded_resource: false,
            validations: Vec::new(),
        };
        self.nodes.get(id as usize).unwrap_or(&EMPTY)
    }

    /// The id of a `$ref` target, if `v` is a `$ref` to a known definition.
    fn ref_target(&self, v: &Value) -> Option<NodeId> {
        let r = v.get("$ref")?.as_str()?;
        let name = r.strip_prefix(REF_PREFIX).unwrap_or_else(|| r.rsplit('/').next().unwrap_or(r));
        self.defs.get(name).copied()
    }

    /// Compiles a sub-schema into a node: a bare `$ref` is its target.
    fn sub(&mut self, v: &Value) -> NodeId {
        if let Some(m) = v.as_object() {
            if m.len() == 1 {
                if let Some(t) = self.ref_target(v) {
                    return t;
                }
            }
        }
        let id = self.push(Node::default());
        self.fill(id, v);
        id
    }

    fn subs(&mut self, v: Option<&Value>) -> Vec<NodeId> {
        v.and_then(Value::as_array).map(|a| a.iter().map(|x| self.sub(x)).collect()).unwrap_or_default()
    }

    fn fill(&mut self, id: NodeId, v: &Value) {
        let Some(m) = v.as_object() else { return };
        let mut n = Node::default();
        let str_of = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        let int_of = |k: &str| m.get(k).and_then(Value::as_i64);
        let num_of = |k: &str| m.get(k).and_then(Value::as_f64);
        let bool_of = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
        n.base = self.ref_target(v);
        if n.base.is_none() {
            // `allOf: [{$ref}]` beside a field's own keys (kube's v3 form).
            if let Some([only]) = m.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                n.base = self.ref_target(only);
            }
        }
        n.ty = m.get("type").and_then(Value::as_str).and_then(Type::parse);
        n.format = str_of("format");
        n.nullable = bool_of("nullable");
        n.required = m.get("required").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
        n.enumeration = m.get("enum").and_then(Value::as_array).cloned();
        n.default = m.get("default").cloned();
        n.maximum = num_of("maximum");
        n.exclusive_maximum = bool_of("exclusiveMaximum");
        n.minimum = num_of("minimum");
        n.exclusive_minimum = bool_of("exclusiveMinimum");
        n.max_length = int_of("maxLength");
        n.min_length = int_of("minLength");
        n.pattern = str_of("pattern").map(|p| Pattern { regex: regex::Regex::new(&p).map_err(|e| e.to_string()), source: p });
        n.max_items = int_of("maxItems");
        n.min_items = int_of("minItems");
        n.unique_items = bool_of("uniqueItems");
        n.multiple_of = num_of("multipleOf");
        n.max_properties = int_of("maxProperties");
        n.min_properties = int_of("minProperties");
        n.list_type = match m.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("atomic") => Some(ListType::Atomic),
            Some("set") => Some(ListType::Set),
            Some("map") => Some(ListType::Map),
            _ => None,
        };
        n.list_map_keys = m.get("x-kubernetes-list-map-keys").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
        n.map_type = match m.get("x-kubernetes-map-type").and_then(Value::as_str) {
            Some("atomic") => Some(MapType::Atomic),
            Some("granular") => Some(MapType::Granular),
            _ => None,
        };
        n.patch_strategy = str_of("x-kubernetes-patch-strategy");
        n.patch_merge_key = str_of("x-kubernetes-patch-merge-key");
        n.int_or_string = bool_of("x-kubernetes-int-or-string");
        n.preserve_unknown_fields = bool_of("x-kubernetes-preserve-unknown-fields");
        n.embedded_resource = bool_of("x-kubernetes-embedded-resource");
        n.validations = m.get("x-kubernetes-validations").and_then(Value::as_array).cloned().unwrap_or_default();
        if let Some(props) = m.get("properties").and_then(Value::as_object) {
            n.props_given = true;
            for (k, p) in props {
                let c = self.sub(p);
                n.properties.insert(k.clone(), c);
            }
        }
        n.additional = match m.get("additionalProperties") {
            Some(Value::Bool(b)) => Additional::Bool(*b),
            Some(s @ Value::Object(_)) => Additional::Schema(self.sub(s)),
            _ => Additional::Unset,
        };
        n.items = match m.get("items") {
            Some(s @ Value::Object(_)) => Some(self.sub(s)),
            _ => None,
        };
        if n.base.is_none() {
            n.all_of = self.subs(m.get("allOf"));
        }
        n.any_of = self.subs(m.get("anyOf"));
        n.one_of = self.subs(m.get("oneOf"));
        n.not = m.get("not").filter(|x| x.is_object()).map(|x| self.sub(x));
        let def = self.nodes.get(id as usize).and_then(|old| old.def.clone());
        if let Some(slot) = self.nodes.get_mut(id as usize) {
            *slot = Node { def, ..n };
        }
    }
}

/// A cursor at one node of a [`Compiled`] layer, cheap to copy.
///
/// Structure (type, properties, items, additionalProperties, required,
/// enum, format, bounds, list and map types, int-or-string,
/// preserve-unknown-fields, embedded-resource, default) is answered by the
/// resolved node: the definition a field names, if it names one. Patch
/// markers are the field's own. A field's `x-kubernetes-map-type` beside a
/// `$ref` is therefore not seen (PersistentVolumeSpec.claimRef says
/// `granular` over ObjectReference's `atomic`); managedFields treated it
/// so before this module and still does.
#[derive(Clone, Copy)]
pub struct SchemaRef<'a> {
    c: &'a Compiled,
    id: NodeId,
}

impl std::fmt::Debug for SchemaRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SchemaRef({}", self.id)?;
        if let Some(d) = self.definition_name() {
            write!(f, " {d}")?;
        }
        write!(f, ")")
    }
}

impl<'a> SchemaRef<'a> {
    fn own(&self) -> &'a Node {
        self.c.node(self.id)
    }

    /// The node a field resolves to: the definition it names, or itself.
    pub fn resolved(&self) -> SchemaRef<'a> {
        let mut id = self.id;
        // Bounded: a base chain is one `$ref` deep in practice.
        for _ in 0..8 {
            match self.c.node(id).base {
                Some(b) => id = b,
                None => break,
            }
        }
        SchemaRef { c: self.c, id }
    }

    fn n(&self) -> &'a Node {
        self.resolved().own()
    }

    fn child(&self, id: NodeId) -> SchemaRef<'a> {
        SchemaRef { c: self.c, id }
    }

    /// The name of the definition this resolves to
    /// (`io.k8s.api.core.v1.PodSpec`), if it resolves to one.
    pub fn definition_name(&self) -> Option<&'a str> {
        self.n().def.as_deref()
    }

    /// `type`, if given.
    pub fn ty(&self) -> Option<Type> {
        self.n().ty
    }

    /// `format`, if given.
    pub fn format(&self) -> Option<&'a str> {
        self.n().format.as_deref()
    }

    /// `nullable`.
    pub fn nullable(&self) -> bool {
        self.n().nullable
    }

    /// `properties`, in name order.
    pub fn properties(&self) -> impl Iterator<Item = (&'a str, SchemaRef<'a>)> + 'a {
        let c = self.c;
        self.n().properties.iter().map(move |(k, id)| (k.as_str(), SchemaRef { c, id: *id }))
    }

    /// Whether `properties` is given (possibly empty).
    pub fn has_properties(&self) -> bool {
        self.n().props_given
    }

    /// The schema of property `name`, if declared.
    pub fn property(&self, name: &str) -> Option<SchemaRef<'a>> {
        self.n().properties.get(name).map(|id| self.child(*id))
    }

    /// `additionalProperties` when it is a schema (a map's values).
    pub fn additional_properties(&self) -> Option<SchemaRef<'a>> {
        match self.n().additional {
            Additional::Schema(id) => Some(self.child(id)),
            _ => None,
        }
    }

    /// `additionalProperties` when it is a boolean.
    pub fn additional_properties_bool(&self) -> Option<bool> {
        match self.n().additional {
            Additional::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub(crate) fn additional(&self) -> Additional {
        self.n().additional
    }

    /// Whether `additionalProperties` is given at all (schema or boolean).
    pub fn has_additional_properties(&self) -> bool {
        self.n().additional != Additional::Unset
    }

    /// `items`, if given.
    pub fn items(&self) -> Option<SchemaRef<'a>> {
        self.n().items.map(|id| self.child(id))
    }

    /// `required`, in schema order.
    pub fn required(&self) -> &'a [String] {
        &self.n().required
    }

    /// `enum`, if given.
    pub fn enumeration(&self) -> Option<&'a [Value]> {
        self.n().enumeration.as_deref()
    }

    /// `default`, if given.
    pub fn default_value(&self) -> Option<&'a Value> {
        self.n().default.as_ref()
    }

    /// `x-kubernetes-list-type`.
    pub fn list_type(&self) -> Option<ListType> {
        self.n().list_type
    }

    /// `x-kubernetes-list-map-keys`, in schema order.
    pub fn list_map_keys(&self) -> &'a [String] {
        &self.n().list_map_keys
    }

    /// `x-kubernetes-map-type`.
    pub fn map_type(&self) -> Option<MapType> {
        self.n().map_type
    }

    /// The field's own `x-kubernetes-patch-strategy` (`merge`,
    /// `retainKeys`, `merge,retainKeys`, `replace`).
    pub fn patch_strategy(&self) -> Option<&'a str> {
        self.own().patch_strategy.as_deref()
    }

    /// The field's own `x-kubernetes-patch-merge-key`.
    pub fn patch_merge_key(&self) -> Option<&'a str> {
        self.own().patch_merge_key.as_deref()
    }

    /// `x-kubernetes-int-or-string`.
    pub fn int_or_string(&self) -> bool {
        self.n().int_or_string
    }

    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub fn preserve_unknown_fields(&self) -> bool {
        self.n().preserve_unknown_fields
    }

    /// `x-kubernetes-embedded-resource: true`.
    pub fn embedded_resource(&self) -> bool {
        self.n().embedded_resource
    }

    /// `oneOf` alternatives (IntOrString and Quantity among the built-ins).
    pub fn one_of(&self) -> impl Iterator<Item = SchemaRef<'a>> + 'a {
        let c = self.c;
        self.n().one_of.iter().map(move |id| SchemaRef { c, id: *id })
    }

    pub(crate) fn node(&self) -> &'a Node {
        self.n()
    }

    /// The id of the node this resolves to (what per-node tables, such as
    /// the compiled CEL rules, are keyed by).
    pub(crate) fn id(&self) -> NodeId {
        self.resolved().id
    }

    pub(crate) fn at(&self, id: NodeId) -> SchemaRef<'a> {
        self.child(id)
    }
}
