// role-based-email-addresses ships CommonJS without types: module.exports is the array of all roles.
declare module "role-based-email-addresses" {
  const roles: readonly string[];
  export default roles;
}

// Text modules (wrangler.toml's [[rules]] of type "Text"): the file's contents as a string.
declare module "*.txt" {
  const text: string;
  export default text;
}
